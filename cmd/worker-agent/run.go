package main

import (
	"context"
	"io"

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

It also runs whole hooks for writ-hook, the thin hook client install
writes when writ-hook sits beside worker-agent: writ-hook sends the event,
its arguments, its working directory and the environment variables writ
reads, and the sidecar runs the same hook command in this process, without
starting worker-agent. It declines, and writ-hook runs worker-agent hook
itself, when those variables differ from the sidecar's or the hook resolves
to another worker or socket.

The sidecar speaks only for its own worker, with that worker's NATS
credentials: anyone who can open the socket can ask for grants as that
worker, exactly as anyone who can read its password file could. It runs
until interrupted and removes its socket on exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// writ-hook hands hook events to the sidecar, which runs the
			// same hook command as a hook process would, in this process.
			g.HookRunner = func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
				return exitCode(run(ctx, args, stdin, stdout, stderr, nil))
			}
			return g.Sidecar(cmd.Context(), cmd.Flags(), &af)
		},
	}
	af.Add(cmd.Flags(), "", true)
	return cmd
}
