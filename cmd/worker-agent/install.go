package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/worker"
)

const installLong = `install merges writ's hook entries into the harness's settings:
  claude-code  DIR/.claude/settings.json (or ~/.claude/settings.json with
               --user): PreToolUse, PostToolUse and PostToolUseFailure with
               matcher "*", UserPromptSubmit and SessionStart without one
  codex        DIR/.codex/hooks.json (or ~/.codex/hooks.json): PreToolUse,
               PostToolUse, UserPromptSubmit and SessionStart, no matcher
               (every tool, prompt and start)
Each entry runs "worker-agent hook <harness>" (with --config when given),
timeout 30s, inside a small fail-closed POSIX sh script written into the
command: the harnesses block a call only when the hook exits 2, so the
script turns a missing, moved or crashing worker-agent (exit 127, 126, 1,
a signal) into exit 2 with a line saying what to do. The call is blocked,
never let run. Claude Code runs hook commands with sh, so its entry is the
script itself; Codex runs them with the user's shell, so its entry starts
/bin/sh on it.

With --config, and writ-hook beside the worker-agent binary (make build
puts it there), the entry runs writ-hook instead, with the same arguments
and --socket, the worker's sidecar socket: a small client that hands the
event to the sidecar (worker-agent run), which runs the same hook in its
own process, and runs worker-agent hook itself when there is no sidecar or
it declines. Same answers, without starting worker-agent for each event.
--hook-client none keeps worker-agent in the entry.

Before writing, install checks what the hook will need: the binary
(--binary, default this executable) must exist and be executable, and the
worker config (--config) must exist, parse and name the worker and the
main session's lane. Without --config the hook looks for ` + worker.ProjectConfig + `
in the session's directory, then worker.json in the state dir; install
warns when neither exists yet.

The prompt and session-start hooks register what enters the session as
provenance sources (see 'worker-agent hook --help').
Existing hooks, unknown keys and their order are kept; running install again
changes nothing. The file is replaced atomically. --project defaults to the
current directory. 'worker-agent doctor' checks the result.

  openclaw     the OpenClaw config (--config FILE, else $OPENCLAW_CONFIG_PATH,
               else ~/.openclaw/openclaw.json): plugins.entries.writ (enabled,
               with the plugin's config from --agent, --socket and
               --reviewer-*), the plugin directory (--plugin-dir, the
               integrations/openclaw directory) in plugins.load.paths, and
               "writ" in plugins.allow when the config has an allow list.
               Each --agent AGENT_ID=WORKER:LANE binds an OpenClaw agent to
               the writ worker (and its sidecar, 'worker-agent run') and
               lane its calls run as; an agent not listed is blocked.`

const uninstallLong = `uninstall removes the hook entries writ installed from the harness's
settings (DIR/.claude/settings.json or DIR/.codex/hooks.json; ~/.claude or
~/.codex with --user), in any form an earlier install wrote them, and the
groups and lists left empty by that — nothing else.

When writ's entries were the only change since install, the file is put
back byte for byte as it was (install keeps a copy in the state dir), and a
settings file that install created is removed, with the directory install
created for it if that is now empty. Otherwise the rest of the file is kept
as it is now, re-indented. The file is replaced atomically. --project
defaults to the current directory.

For openclaw, uninstall removes plugins.entries.writ, the plugin's
directory from plugins.load.paths and "writ" from plugins.allow, with the
same byte-for-byte restore.`

func newInstallCmd(g *globals, install bool) *cobra.Command {
	verb, short, long := "install", "Add writ's hooks to a harness's settings", installLong
	if !install {
		verb, short, long = "uninstall", "Remove the hooks writ installed from a harness's settings", uninstallLong
	}
	var (
		f worker.InstallFlags
		o worker.OpenClawFlags
	)
	example := `  worker-agent install claude-code --project . --config /etc/writ/w1.json
  worker-agent install codex --user --config /etc/writ/w1.json
  worker-agent doctor claude-code --project .
  worker-agent install openclaw --config ~/.openclaw/openclaw.json --plugin-dir /opt/writ/integrations/openclaw \
    --agent main=w1:coordinator --agent research=w2:isolated`
	if !install {
		example = `  worker-agent uninstall claude-code --project .
  worker-agent uninstall codex --user
  worker-agent uninstall openclaw --config ~/.openclaw/openclaw.json`
	}
	cmd := &cobra.Command{
		Use:     verb + " claude-code|codex [--project DIR | --user] | openclaw [--config FILE]",
		Short:   short,
		Long:    long,
		Example: example,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("name the harness: %s claude-code, %s codex or %s openclaw", verb, verb, verb)
			}
			if !worker.KnownHarness(args[0]) && args[0] != harness.OpenClaw {
				return usageErr("unknown harness %q: want claude-code, codex or openclaw", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == harness.OpenClaw {
				if f.Project != "" || f.User || f.Binary != "" {
					return usageErr("openclaw takes --config (the OpenClaw config file), not --project, --user or --binary")
				}
				return g.InstallOpenClaw(f, o, install)
			}
			if o.PluginDir != "" || o.Socket != "" || len(o.Agents) > 0 || o.ReviewerUser != "" || o.ReviewerPWFile != "" {
				return usageErr("--plugin-dir, --socket, --agent and --reviewer-* are for openclaw only")
			}
			if !install && f.Config != "" {
				return usageErr("uninstall %s takes no --config", args[0])
			}
			return g.Install(args[0], f, install)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Project, "project", "", "project directory (default: the current directory)")
	fl.BoolVar(&f.User, "user", false, "use the user-level settings in the home directory instead")
	fl.StringVar(&f.StateDir, "state-dir", "", "state directory, where install keeps the settings file's original bytes for uninstall (default $"+worker.EnvStateDir+", $XDG_STATE_HOME/writ or ~/.local/state/writ)")
	fl.StringVar(&o.PluginDir, "plugin-dir", "", "openclaw: the directory of writ's OpenClaw plugin (integrations/openclaw)")
	if install {
		fl.StringVar(&f.Config, "config", "", "worker config the hook should read (checked now; written into the hook command as an absolute path); for openclaw, the OpenClaw config file")
		fl.StringVar(&f.Binary, "binary", "", "worker-agent binary the hook runs (default: this executable)")
		fl.StringVar(&f.HookClient, "hook-client", worker.HookClientAuto, "auto: the entry runs writ-hook, the thin client, when it sits beside the worker-agent binary and --config is given; none: it runs worker-agent")
		fl.StringVar(&o.Socket, "socket", "", "openclaw: the sidecar socket every agent uses (default: each worker's worker-<worker>.sock in the state dir)")
		fl.StringArrayVar(&o.Agents, "agent", nil, "openclaw: AGENT_ID=WORKER:LANE, repeatable: the writ worker and lane an OpenClaw agent's calls run as")
		fl.StringVar(&o.ReviewerUser, "reviewer-user", "", "openclaw: the operator NATS user that forwards an allow-once to writ (never a worker)")
		fl.StringVar(&o.ReviewerPWFile, "reviewer-password-file", "", "openclaw: the file holding the reviewer's NATS password")
	} else {
		fl.StringVar(&f.Config, "config", "", "openclaw: the OpenClaw config file")
	}
	return cmd
}
