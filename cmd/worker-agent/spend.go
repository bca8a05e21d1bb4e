package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

func newSpendCmd(g *globals) *cobra.Command {
	var (
		key, digest string
		args        argsInput
	)
	cmd := &cobra.Command{
		Use:   "spend GRANT --worker W (--args JSON | --args-file F | --digest HEX)",
		Short: "Spend a grant as the tool call starts",
		Long: `Spend a grant as the tool call starts. Present the same arguments the grant
was requested with (or their request digest); the issuer refuses a spend of
any other request. On permit, stdout holds the attempt receipt envelope; a
retry with the same --idempotency-key returns that receipt again, any other
second spend is refused as already_spent.

` + exitCodesHelp,
		Example: `  worker-agent spend 7f9c2b1e-0d4a-4f7e-9c1a-2b3d4e5f6a7b --worker w1 --args '{"command":"ls"}'`,
		Args:    oneGrant,
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			grant := pos[0]
			if err := checkID("GRANT", grant); err != nil {
				return err
			}
			if cmd.Flags().Changed("idempotency-key") {
				if err := checkName("--idempotency-key", key); err != nil {
					return err
				}
			}
			n := args.given()
			if digest != "" {
				n++
			}
			switch n {
			case 0:
				return usageErr("one of --args, --args-file or --digest is required")
			case 2, 3:
				return usageErr("give only one of --args, --args-file or --digest")
			}
			req := api.SpendRequest{GrantID: grant, IdempotencyKey: newKey(key)}
			if digest != "" {
				h, err := events.ParseHash(digest)
				if err != nil {
					return usageErr("--digest: %v", strings.TrimPrefix(err.Error(), "events: "))
				}
				req.Digest = h.String()
			} else {
				raw, err := args.read(g.Stdin)
				if err != nil {
					return err
				}
				req.Args = raw
			}
			return g.call(cmd.Context(), req.IdempotencyKey, func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
				return c.Spend(ctx, req)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&args.inline, "args", "", "the tool arguments as JSON, as requested")
	f.StringVar(&args.file, "args-file", "", "read the tool arguments from a file, or - for stdin")
	f.StringVar(&digest, "digest", "", "the request digest (64 hex digits) instead of the arguments")
	f.StringVar(&key, "idempotency-key", "", "idempotency key (default: a fresh one; reuse it to retry)")
	return cmd
}
