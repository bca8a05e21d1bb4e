package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/worker"
)

func newRunCmd(g *globals) *cobra.Command {
	var af worker.AdapterFlags
	cmd := &cobra.Command{
		Use:   "run [--socket PATH]",
		Short: "Run the per-runtime sidecar: one NATS connection, served on a unix socket",
		Long: `Run the sidecar for one worker: it holds one NATS connection to the issuer
and serves grant, spend, effect and source-registration requests from the
hook commands on a unix socket (--socket; default worker-<worker>.sock in
the state dir, mode 0600 in a 0700 directory). A hook that finds the socket
skips starting a NATS connection of its own; one that does not (or finds a
stale socket, one serving another worker, or an older sidecar that does not
know source registration) connects directly.

The sidecar speaks only for its own worker, with that worker's NATS
credentials: anyone who can open the socket can ask for grants as that
worker, exactly as anyone who can read its password file could. It runs
until interrupted and removes its socket on exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.Sidecar(cmd.Context(), cmd.Flags(), &af)
		},
	}
	af.Add(cmd.Flags(), "", true)
	return cmd
}
