package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/worker"
)

// Environment 'worker-agent spawn' sets for the command it runs, besides
// WRIT_WORKER, worker.EnvSpawned and worker.EnvSpawnedLane.
const (
	EnvParent      = "WRIT_PARENT_WORKER"
	EnvIncarnation = "WRIT_INCARNATION"
	EnvExpires     = "WRIT_SPAWN_EXPIRES"
)

func newSpawnCmd(g *globals) *cobra.Command {
	var (
		lane, child, parentLane string
		credsOut                string
		tools, classes, targets []string
		ttl                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "spawn --lane L [--tools T,...] [--classes C,...] [--targets P,...] [--ttl D] [-- COMMAND ARGS...]",
		Short: "Spawn a child worker with a narrower scope, and run a command as it",
		Long: `Ask the issuer for a child of this worker (receipt format level 8). The
child's scope is a subset of this worker's at this moment: tool patterns
(--tools), consequence classes (--classes), target patterns (--targets,
canonical targets such as path:/repo/* or url:https://docs.example.org/*)
and lifetime (--ttl, never past this worker's). A list left out is
inherited. The child is never a coordinator, its calls are judged under its
lane and under every ancestor's, and every grant it gets binds its
ancestors' revocation counters: revoking this worker stops the child's
grants and its next requests in the same log entry.

A widening spawn is refused with scope_widens, naming the field that would
widen (missing: tools, classes, targets, ttl, lane or depth).

Without COMMAND, the envelope is printed (worker, parent, lane,
incarnation, expires_at) and the exit code follows the decision. With
COMMAND, it runs as the child: WRIT_WORKER and ` + worker.EnvSpawned + ` name the
child, ` + worker.EnvSpawnedLane + ` its lane (both beat a worker config, so hooks
and sidecars inside act as the child), ` + EnvParent + `, ` + EnvIncarnation + ` and
` + EnvExpires + ` describe it, and the command is stopped when the child's lifetime
ends. The exit code is the command's.

In NATS operator mode (this worker connects with --nats-creds) the child
gets a NATS user of its own: a key pair is generated here and only its
public key is sent; the issuer answers with a user JWT for that key that
may publish only under writ.api.<child>.> and expires with the child. The
command gets the child's .creds file (mode 0600, in a private directory
removed when it exits) in ` + connect.EnvCreds + `; --creds-out writes it to a file
of your choice instead. When the issuer signs no credential, the command is
not run (exit 3) rather than run with this worker's. Revoking this worker
(or the child) revokes the child's NATS user on every server. With static
NATS users the child runs with this worker's connection settings, as
before.

` + exitCodesHelp,
		Example: `  worker-agent spawn --worker coder-1 --lane isolated --tools Read,Grep,Glob --ttl 30m
  worker-agent spawn --lane isolated --classes local_read --targets 'path:/srv/repo/*' -- claude -p "survey the repo"`,
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			if lane == "" {
				return usageErr("--lane is required: the lane the child runs in")
			}
			if err := checkID("--lane", lane); err != nil {
				return err
			}
			if parentLane != "" {
				if err := checkID("--parent-lane", parentLane); err != nil {
					return err
				}
			}
			if child != "" {
				if err := checkID("--child", child); err != nil {
					return err
				}
			} else {
				child = client.ChildID(g.Worker)
			}
			if ttl < 0 || ttl > 24*time.Hour || (ttl > 0 && ttl < time.Second) {
				return usageErr("--ttl must be between 1s and 24h (0: an hour, never past this worker's), got %v", ttl)
			}
			for _, l := range []struct {
				flag string
				v    []string
			}{{"--tools", tools}, {"--classes", classes}, {"--targets", targets}} {
				if len(l.v) > api.MaxSpawnScope {
					return usageErr("%s: at most %d entries", l.flag, api.MaxSpawnScope)
				}
				for _, v := range l.v {
					if v == "" || len(v) > api.MaxScopeEntryLen {
						return usageErr("%s: an entry is empty or longer than %d bytes", l.flag, api.MaxScopeEntryLen)
					}
				}
			}
			req := api.SpawnRequest{Child: child, Lane: lane, ParentLane: parentLane, Tools: tools, Classes: classes,
				Targets: targets, TTLMillis: ttl.Milliseconds()}
			// In operator mode (this worker connects with a credentials
			// file) the child gets a NATS user of its own: its key pair is
			// generated here, only the public key goes to the issuer.
			wantCreds := credsOut != "" || len(argv) > 0 && g.Conn.CredsFile != ""
			if credsOut != "" {
				if _, err := os.Lstat(credsOut); err == nil {
					return usageErr("--creds-out %s exists: the child's credential is written to a new file", credsOut)
				}
			}
			if len(argv) == 0 && !wantCreds {
				return g.call(cmd.Context(), "", func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
					return c.Spawn(ctx, req)
				})
			}
			var seed []byte
			if wantCreds {
				var err error
				if seed, req.UserKey, err = worker.NewChildKey(); err != nil {
					return err
				}
			}
			env, err := g.spawnOnce(cmd.Context(), req)
			if err != nil {
				return err
			}
			if env.Decision != grants.Permit {
				return g.report(env)
			}
			fmt.Fprintf(g.Stderr, "spawned %s (parent %s, lane %s, incarnation %d) until %s\n", env.Worker, env.Parent, env.Lane,
				env.Incarnation, time.Unix(0, env.ExpiresAt).UTC().Format(time.RFC3339))
			if env.CredentialNote != "" {
				fmt.Fprintf(g.Stderr, "  credential: %s\n", env.CredentialNote)
			}
			credsFile := ""
			if wantCreds {
				// Fail closed: a child without its own credential is not
				// run, and never with this worker's.
				if credsOut != "" {
					err = worker.WriteChildCreds(credsOut, env, seed)
					credsFile = credsOut
				} else {
					var cleanup func()
					credsFile, cleanup, err = worker.ChildCredsFile(env, seed)
					defer cleanup()
				}
				if err != nil {
					_ = g.print(env)
					return &worker.ExitError{Code: ExitUnavailable, Err: fmt.Errorf("%v: the child is not run", err)}
				}
			}
			if len(argv) == 0 {
				return g.report(env)
			}
			return runAsChild(cmd.Context(), g, env, credsFile, argv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&lane, "lane", "", "the child's lane (required; never coordinator)")
	f.StringVar(&child, "child", "", "the child's id (default <worker>-<8 hex digits>)")
	f.StringVar(&parentLane, "parent-lane", os.Getenv(worker.EnvSpawnedLane), "the lane this worker runs in: the child is judged under it too")
	f.StringSliceVar(&tools, "tools", nil, "tool patterns the child may call (default: this worker's)")
	f.StringSliceVar(&classes, "classes", nil, "consequence classes the child may spend (default: this worker's)")
	f.StringSliceVar(&targets, "targets", nil, "canonical target patterns the child may reach (default: this worker's)")
	f.DurationVar(&ttl, "ttl", 0, "the child's lifetime (default 1h; never past this worker's)")
	f.StringVar(&credsOut, "creds-out", "", "write the child's NATS credentials (operator mode) to this new file, mode 0600")
	return cmd
}

// spawnOnce sends one spawn request and returns the answer (an error only
// when nothing is known: exit 3).
func (g *globals) spawnOnce(ctx context.Context, req api.SpawnRequest) (grants.Envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Conn.Timeout)
	defer cancel()
	c, nc, err := g.Client(ctx)
	if err != nil {
		return grants.Envelope{}, g.unavailable(err, "")
	}
	defer nc.Close()
	env, err := c.Spawn(ctx, req)
	if err != nil {
		if errors.Is(err, client.ErrUnavailable) {
			err = g.Conn.NoAnswer(err)
		}
		return grants.Envelope{}, g.unavailable(err, "")
	}
	return env, nil
}

// runAsChild runs argv as the spawned child until it exits or the child's
// lifetime ends.
func runAsChild(ctx context.Context, g *globals, env grants.Envelope, credsFile string, argv []string) error {
	if left := time.Until(time.Unix(0, env.ExpiresAt)); left > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = g.Stdin, g.Stdout, g.Stderr
	c.Env = append(os.Environ(),
		EnvWorker+"="+env.Worker,
		worker.EnvSpawned+"="+env.Worker,
		worker.EnvSpawnedLane+"="+env.Lane,
		EnvParent+"="+env.Parent,
		EnvIncarnation+"="+strconv.FormatUint(env.Incarnation, 10),
		EnvExpires+"="+time.Unix(0, env.ExpiresAt).UTC().Format(time.RFC3339),
	)
	if credsFile != "" {
		// The child's own credential replaces this worker's.
		c.Env = append(c.Env, connect.EnvCreds+"="+credsFile)
	}
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() == context.DeadlineExceeded:
		return &worker.ExitError{Code: 1, Err: fmt.Errorf("child %s's lifetime ended: the command was stopped", env.Worker)}
	case errors.As(err, &ee):
		return &worker.ExitError{Code: ee.ExitCode()}
	}
	return &worker.ExitError{Code: ExitUsage, Err: fmt.Errorf("running %s: %v", argv[0], err)}
}

func newCheckpointCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint save|restore",
		Short: "Save a session's context, or restore it into a new incarnation",
		Long: `A checkpoint carries context, never authority. 'save' writes the task text,
artifact paths with their SHA-256, pending review references, cached
canonical targets, staged outbound messages (destination and body digest),
the session's provenance descriptors and, as history, grant ids. 'restore'
starts a new incarnation of the worker at the issuer (every grant of the
old incarnation is refused at spend with grant_revoked, naming the
incarnation) and reports the bundle as history: artifacts hashed again,
targets re-resolved by the issuer at the next request, reviews bound only
as the issuer holds them now, staged messages unsent.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErr("a subcommand is required: save or restore")
		},
	}
	cmd.AddCommand(newCheckpointSaveCmd(g), newCheckpointRestoreCmd(g))
	return cmd
}

func newCheckpointSaveCmd(g *globals) *cobra.Command {
	var (
		out, lane, session, task, taskFile, stateDir string
		artifacts, reviews, targets, grantIDs        []string
		staged                                       []string
	)
	cmd := &cobra.Command{
		Use:   "save --out FILE [--task TEXT | --task-file F] [--artifact PATH]... [--review REF]... [--target T]... [--staged TOOL=DEST[#SHA256]]... [--grant ID]...",
		Short: "Write the session's context (nothing spendable) to FILE",
		Long: `Write a checkpoint bundle (JSON, mode 0600). With --session, the session's
provenance descriptors (never content) are included from the state
directory. Grant ids given with --grant are written as history: they are
dead after a restore.`,
		Example: `  worker-agent checkpoint save --worker coder-1 --out /tmp/coder-1.ckpt --task-file TASK.md \
      --artifact out/report.pdf --review report_v2_review --target path:/srv/repo/main.go`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if out == "" {
				return usageErr("--out is required: the bundle file to write")
			}
			if task != "" && taskFile != "" {
				return usageErr("give either --task or --task-file, not both")
			}
			if taskFile != "" {
				b, err := os.ReadFile(taskFile)
				if err != nil {
					return usageErr("--task-file: %v", err)
				}
				task = string(b)
			}
			var st []worker.CheckpointStaged
			for _, s := range staged {
				tool, rest, ok := strings.Cut(s, "=")
				dest, sum, _ := strings.Cut(rest, "#")
				if !ok || tool == "" || dest == "" {
					return usageErr("--staged %q: want TOOL=DESTINATION[#BODY_SHA256]", s)
				}
				st = append(st, worker.CheckpointStaged{Tool: tool, Destination: dest, BodySHA256: sum})
			}
			if stateDir == "" {
				stateDir = worker.StateDir()
			}
			cp, err := worker.BuildCheckpoint(cmd.Context(), worker.CheckpointInput{
				Worker: g.Worker, Lane: lane, Session: session, Task: task, Artifacts: artifacts,
				Reviews: reviews, Targets: targets, Grants: grantIDs, Staged: st, StateDir: stateDir, Now: time.Now(),
			})
			if err != nil {
				return usageErr("%v", err)
			}
			if err := worker.WriteCheckpoint(out, cp); err != nil {
				return usageErr("writing %s: %v", out, err)
			}
			return g.printJSON(map[string]any{"saved": out, "worker": cp.Worker, "artifacts": len(cp.Artifacts),
				"reviews": len(cp.Reviews), "targets": len(cp.Targets), "staged": len(cp.Staged), "sources": len(cp.Sources),
				"history_grants": len(cp.History)})
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "bundle file to write (required)")
	f.StringVar(&lane, "lane", "", "the lane the session runs in")
	f.StringVar(&session, "session", "", "harness session id: include its provenance descriptors")
	f.StringVar(&task, "task", "", "the task text")
	f.StringVar(&taskFile, "task-file", "", "read the task text from a file")
	f.StringVar(&stateDir, "state-dir", "", "state directory (default $"+worker.EnvStateDir+", $XDG_STATE_HOME/writ or ~/.local/state/writ)")
	f.StringArrayVar(&artifacts, "artifact", nil, "an artifact file (hashed now)")
	f.StringArrayVar(&reviews, "review", nil, "a pending review reference (id, caption or keep token)")
	f.StringArrayVar(&targets, "target", nil, "a cached canonical target")
	f.StringArrayVar(&staged, "staged", nil, "a staged outbound message: TOOL=DESTINATION[#BODY_SHA256]")
	f.StringArrayVar(&grantIDs, "grant", nil, "a grant id the session held (written as history)")
	return cmd
}

func newCheckpointRestoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Start a new incarnation and read the bundle back as history",
		Long: `Read a checkpoint bundle (strictly: unknown fields, another version or
another worker's bundle are refused), ask the issuer for this worker's next
incarnation, and print what came back: the new incarnation, artifacts
hashed again (unchanged, changed or missing) and everything else as
history with the step that re-establishes it. The restored session holds
nothing spendable. A revoked worker cannot restore itself: an operator
respawns it ('issuer respawn').

` + exitCodesHelp,
		Example: `  worker-agent checkpoint restore --worker coder-1 /tmp/coder-1.ckpt`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			cp, err := worker.ReadCheckpoint(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			if cp.Worker != g.Worker {
				return usageErr("%s was saved by worker %s, not %s: a checkpoint restores into the worker that saved it (spawn a child for anything else)", args[0], cp.Worker, g.Worker)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.Conn.Timeout)
			defer cancel()
			c, nc, err := g.Client(ctx)
			if err != nil {
				return g.unavailable(err, "")
			}
			defer nc.Close()
			env, err := c.Restore(ctx)
			if err != nil {
				if errors.Is(err, client.ErrUnavailable) {
					err = g.Conn.NoAnswer(err)
				}
				return g.unavailable(err, "")
			}
			if env.Decision != grants.Permit {
				return g.report(env)
			}
			return g.printJSON(cp.Restore(env.Incarnation))
		},
	}
	return cmd
}

// printJSON prints v as JSON on stdout (indented with --pretty).
func (g *globals) printJSON(v any) error {
	var b []byte
	var err error
	if g.Pretty {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.Stdout, string(b))
	return err
}
