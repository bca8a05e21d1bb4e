package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
)

// operatorClient dials NATS with the shared flags and returns a client and
// a context bounded by --timeout, which connecting (retried while NATS is
// unreachable) shares with the requests.
func operatorClient(ctx context.Context, o *connect.Options) (*client.Client, context.Context, func(), error) {
	o.Name = "writ-operator"
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	nc, err := o.DialContext(cctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return client.New(nc, ""), cctx, func() { cancel(); nc.Close() }, nil
}

// printEnvelope writes env as JSON and turns a refusal into refusedError.
func printEnvelope(w io.Writer, env grants.Envelope) error {
	b, _ := json.MarshalIndent(env, "", "  ")
	fmt.Fprintln(w, string(b))
	if env.Decision != grants.Permit {
		msg := fmt.Sprintf("refused: %s", env.Reason)
		if env.Detail != "" {
			msg += ": " + env.Detail
		}
		return refusedError{msg}
	}
	return nil
}

func addConnFlags(cmd *cobra.Command, o *connect.Options) {
	o.AddFlags(cmd.Flags())
}
