package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/worker"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var f worker.DoctorFlags
	cmd := &cobra.Command{
		Use:   "doctor [claude-code|codex] [--project DIR | --user] [--config FILE] [--json]",
		Short: "Check that writ's hooks, worker config, credentials, NATS and the issuer work",
		Long: `doctor checks, one line each, what the hooks need to answer a call:

  hooks        the writ entries in the harness's settings (claude-code,
               codex, or both when none is named; the project's settings
               and the user's, or only those of --project / --user): every
               event installed, through the fail-closed wrapper, pointing
               at an existing executable, and the installed command
               answering a harmless probe event (run with /bin/sh -c, as
               the harness does; nothing is sent to the issuer)
  config       the worker config: --config, else the one the installed
               hook command names, else ` + worker.ProjectConfig + ` of the project,
               else worker.json in the state dir. It must exist, parse,
               and name the worker and the main session's lane
  credentials  nats_password_file and nats_ca: present, readable, the
               password file not readable by others, the CA a PEM
               certificate
  nats         a NATS connection with those settings
  issuer       an issuer answering this worker on NATS (a request it
               refuses as malformed, so nothing is recorded): told apart
               from a NATS server with no issuer behind it, and from NATS
               refusing this user the worker's subjects

Each line is "ok" or "FAIL" with what was found, and for a failure what to
do. --json prints {"ok": bool, "checks": [{"name", "status", "detail",
"fix"}]} instead. Exit 0 when every check passed, 1 when one failed, 2 for
a usage error.`,
		Example: `  worker-agent doctor
  worker-agent doctor claude-code --project ~/src/shop
  worker-agent doctor codex --user --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErr("doctor takes at most one harness (claude-code or codex), got %d arguments", len(args))
			}
			if len(args) == 1 {
				if !worker.KnownHarness(args[0]) {
					return usageErr("unknown harness %q: want claude-code or codex", args[0])
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.User && f.Project != "" {
				return usageErr("give --project or --user, not both")
			}
			hs := []string{harness.ClaudeCode, harness.Codex}
			if len(args) == 1 {
				hs = args
			}
			return g.Doctor(cmd.Context(), cmd.Flags(), hs, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Project, "project", "", "project directory whose settings to check (default: the current directory, and the user's settings)")
	fl.BoolVar(&f.User, "user", false, "check only the user-level settings in the home directory")
	fl.StringVar(&f.Config, "config", "", "worker config to check (default: the one the installed hook names, else the hook's own lookup)")
	fl.StringVar(&f.StateDir, "state-dir", "", "state directory (default $"+worker.EnvStateDir+", $XDG_STATE_HOME/writ or ~/.local/state/writ)")
	fl.BoolVar(&f.JSON, "json", false, "print the report as JSON")
	return cmd
}
