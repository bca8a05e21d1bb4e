package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// BenchmarkClaudeCodePreToolUse measures what a PreToolUse hook adds to a
// tool call: starting the built binary, reaching the issuer, a grant and
// its spend (two raft commits on a dev issuer), and the answer. "cold"
// opens a NATS connection per hook; "warm" goes through the sidecar
// (worker-agent run) on its unix socket. "start" is the floor both share:
// the same binary answering an event that needs no grant (SessionStart),
// i.e. process start, flag parsing and decoding. "issuer" is the other
// floor: the same grant and spend from inside this process over a held
// connection, no hook process at all. Besides ns/op it reports the p50 and
// p99 of each call's wall time in milliseconds, and for the hook processes
// the median of their CPU time, user and system (cpu-p50-ms), which a
// loaded machine inflates less than the wall time. "thin" is the warm
// path through writ-hook, the thin client, whose sidecar runs the hook
// in its own process: its cpu-p50-ms is writ-hook's alone (the hook's
// work moved into the sidecar, which "warm" does not count either).
// "installed" is what a Claude Code user gets: the hook command install
// writes (writ-hook inside the inline fail-closed script) run with
// /bin/sh -c, as Claude Code runs it; "installed-nested" the same through
// the nested /bin/sh wrapper that install wrote for Claude Code before
// (and still writes for Codex). Their cpu-p50-ms counts the shell and
// writ-hook together.
//
//	go test -run '^$' -bench ClaudeCodePreToolUse -benchtime 200x ./cmd/worker-agent/
func BenchmarkClaudeCodePreToolUse(b *testing.B) {
	env := testenv.StartSingle(b, b.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	dir := b.TempDir()
	cfg := writeJSON(b, dir, "w.json", workerConfigFor(env.URL))
	bin := builtBinary(b)
	base := fixture(b, "claude-code/pre_bash.json")
	socket := filepath.Join(dir, "run", "w1.sock")

	b.Run("issuer", func(b *testing.B) {
		nc, err := nats.Connect(env.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		c := client.New(nc, "w1")
		in, err := harness.Decode(bytes.NewReader(base))
		if err != nil {
			b.Fatal(err)
		}
		call, _ := in.Call(harness.ClaudeCode)
		call.Session = fmt.Sprint("issuer-", time.Now().UnixNano())
		times := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			call.CallID = fmt.Sprint(i)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			// What the hook's gate sends: the grant, then its spend, both
			// under the call's idempotency key.
			key := call.IdempotencyKey()
			env, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Session: call.GrantSession(), Tool: call.Tool, Args: call.Args, IdempotencyKey: key})
			if err == nil && env.Decision == grants.Permit {
				env, err = c.Spend(ctx, api.SpendRequest{GrantID: env.GrantID, Args: call.Args, IdempotencyKey: key})
			}
			cancel()
			times = append(times, time.Since(start))
			if err != nil || env.Decision != grants.Permit {
				b.Fatalf("%+v %v", env, err)
			}
		}
		b.StopTimer()
		reportPercentiles(b, times)
	})
	// WRIT_BENCH_OTHER_WORKER names another worker-agent binary (an
	// earlier build, to compare against): each iteration then runs both
	// hooks, in alternating order, so both see the same machine load, and
	// the other's results are reported as other-*. The warm path gives it
	// a sidecar of its own build.
	other := os.Getenv("WRIT_BENCH_OTHER_WORKER")
	for _, path := range []string{"start", "cold", "warm", "thin", "installed", "installed-nested"} {
		b.Run(path, func(b *testing.B) {
			sock, otherSock := filepath.Join(dir, "no-sidecar.sock"), filepath.Join(dir, "no-sidecar.sock")
			bin := bin
			var shellCmd string // the installed hook command, for installed*
			if strings.HasPrefix(path, "installed") {
				// writ-hook as install writes it for Claude Code, run the
				// way Claude Code runs it (sh -c): the inline fail-closed
				// script, or the nested /bin/sh wrapper of earlier builds.
				bin = filepath.Join(thinDir(b, true), "writ-hook")
				sock = filepath.Join(dir, "run", "w1-"+path+".sock")
				startSidecarIn(b, dir, cfg, sock)
				args := []string{"hook", "claude-code", "--config", cfg, "--socket", sock}
				var err error
				if path == "installed" {
					shellCmd, err = harness.HookCommand(harness.ClaudeCode, bin, args...)
				} else {
					shellCmd, err = harness.WrapHookCommand(bin, args...)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if path == "thin" {
				// writ-hook (worker-agent beside it) and a sidecar in the
				// hooks' own environment, so that it runs them itself.
				bin = filepath.Join(thinDir(b, true), "writ-hook")
				sock = filepath.Join(dir, "run", "w1-thin.sock")
				startSidecarIn(b, dir, cfg, sock)
			}
			if path == "warm" {
				startSidecar(b, cfg, socket)
				sock = socket
				if other != "" {
					otherSock = filepath.Join(dir, "run", "w1-other.sock")
					startSidecarOf(b, func(testing.TB) string { return other }, cfg, otherSock)
				}
			}
			// Fresh calls every time: a replayed idempotency key would
			// skip the raft commits.
			run := time.Now().UnixNano()
			input := func(i int, who string) []byte {
				if path == "start" {
					return fixture(b, "claude-code/session_start.json")
				}
				return patch(b, base, map[string]any{"tool_use_id": fmt.Sprintf("toolu_%s%s_%d_%d", path, who, run, i)})
			}
			inputs, otherInputs := make([][]byte, b.N), make([][]byte, b.N)
			for i := range inputs {
				inputs[i] = input(i, "")
				if other != "" {
					otherInputs[i] = input(i, "-other")
				}
			}
			var this, that hookTimes
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if shellCmd != "" {
					this.runCommand(b, exec.Command("/bin/sh", "-c", shellCmd), dir, inputs[i])
					continue
				}
				if other == "" {
					this.run(b, bin, cfg, sock, dir, inputs[i])
					continue
				}
				if i%2 == 0 {
					this.run(b, bin, cfg, sock, dir, inputs[i])
					that.run(b, other, cfg, otherSock, dir, otherInputs[i])
				} else {
					that.run(b, other, cfg, otherSock, dir, otherInputs[i])
					this.run(b, bin, cfg, sock, dir, inputs[i])
				}
			}
			b.StopTimer()
			reportPercentiles(b, this.wall)
			b.ReportMetric(median(this.cpu), "cpu-p50-ms")
			if other != "" {
				b.ReportMetric(percentile(that.wall, 0.50), "other-p50-ms")
				b.ReportMetric(percentile(that.wall, 0.99), "other-p99-ms")
				b.ReportMetric(median(that.cpu), "other-cpu-p50-ms")
			}
		})
	}
}

// hookTimes are the wall times of hook runs and the CPU time (user and
// system) each process used: on a loaded machine the wall time includes
// waiting for a core, the CPU time does not.
type hookTimes struct{ wall, cpu []time.Duration }

// run runs one hook process of bin on in and records its times.
func (h *hookTimes) run(b *testing.B, bin, cfg, sock, dir string, in []byte) {
	h.runCommand(b, exec.Command(bin, "hook", "claude-code", "--config", cfg, "--socket", sock), dir, in)
}

// runCommand runs cmd as one hook run on in and records its times (for
// a command through sh, the CPU time is the shell's and its children's).
func (h *hookTimes) runCommand(b *testing.B, cmd *exec.Cmd, dir string, in []byte) {
	bin := cmd.Path
	cmd.Dir = dir
	cmd.Env = binEnv(dir)
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	h.wall = append(h.wall, time.Since(start))
	if err != nil || out.Len() != 0 {
		b.Fatalf("hook %s: %v %s", bin, err, out.String())
	}
	h.cpu = append(h.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
}

// percentile is the p-quantile of times in milliseconds (times gets
// sorted).
func percentile(times []time.Duration, p float64) float64 {
	slices.Sort(times)
	return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
}

func median(times []time.Duration) float64 { return percentile(times, 0.50) }

func reportPercentiles(b *testing.B, times []time.Duration) {
	b.ReportMetric(percentile(times, 0.50), "p50-ms")
	b.ReportMetric(percentile(times, 0.99), "p99-ms")
}

// BenchmarkClaudeCodeHookCycle measures one hooked call end to end: the
// PreToolUse hook (grant and spend) and then the PostToolUse hook (the
// outcome and the registration of the result as a source), two processes
// sharing one state directory, each opening its own NATS connection. At
// receipt format 11 ("format11") that is two requests, each one raft
// entry: grant_spend and effect_source. "format10" holds the issuer below
// it: the combined requests are refused before anything is proposed and
// the hooks send grant and spend, then effect and source. "issuer-*" are
// the same requests from inside this process over a held connection, no
// hook process: "issuer-separate" the five requests of a hooked call
// before the combined ones (grant, spend, the grant asked for again at
// PostToolUse, effect, source), "issuer-combined" the two. Besides ns/op
// it reports the p50 and p99 of each cycle's wall time in milliseconds.
// "format11-thin" runs both hooks through writ-hook, whose sidecar runs
// them in its own process; "format11-installed" the same through the
// command install writes, run with /bin/sh -c as Claude Code runs it. WRIT_BENCH_OTHER_WORKER names another worker-agent binary to run the
// hooks with instead (its results are named format*-other).
//
//	go test -run '^$' -bench ClaudeCodeHookCycle -benchtime 100x ./cmd/worker-agent/
func BenchmarkClaudeCodeHookCycle(b *testing.B) {
	post := fixture(b, "claude-code/post_webfetch.json")
	pre := patch(b, post, map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})
	bin := builtBinary(b)
	for _, level := range []uint64{fsm.ReceiptFormatResultFields, fsm.ReceiptFormatGrantSpend} {
		env := startIssuerAt(b, level)
		dir := b.TempDir()
		cfg := writeJSON(b, dir, "w.json", workerConfigFor(env.URL))
		name := fmt.Sprintf("format%d", level)
		if other := os.Getenv("WRIT_BENCH_OTHER_WORKER"); other != "" {
			// Another build's worker-agent (an earlier one, to compare
			// against), run against this issuer.
			bin, name = other, name+"-other"
		}
		// cycle runs both hooks of each call with command (a fresh
		// *exec.Cmd per hook).
		cycle := func(b *testing.B, command func() *exec.Cmd) {
			run := time.Now().UnixNano()
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := map[string]any{"tool_use_id": fmt.Sprintf("toolu_cycle_%d_%d", run, i)}
				start := time.Now()
				for _, in := range [][]byte{patch(b, pre, id), patch(b, post, id)} {
					cmd := command()
					cmd.Dir = dir
					cmd.Env = binEnv(dir)
					cmd.Stdin = bytes.NewReader(in)
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					if err := cmd.Run(); err != nil {
						b.Fatalf("hook: %v %s", err, out.String())
					}
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, times)
		}
		direct := func(bin string, extra ...string) func() *exec.Cmd {
			return func() *exec.Cmd {
				return exec.Command(bin, append([]string{"hook", "claude-code", "--config", cfg}, extra...)...)
			}
		}
		b.Run(name, func(b *testing.B) { cycle(b, direct(bin)) })
		if level < fsm.ReceiptFormatGrantSpend {
			continue
		}
		// The same two hooks through writ-hook and a sidecar that runs
		// them in its own process.
		b.Run(name+"-thin", func(b *testing.B) {
			sock := filepath.Join(dir, "run", "w1.sock")
			startSidecarIn(b, dir, cfg, sock)
			cycle(b, direct(filepath.Join(thinDir(b, true), "writ-hook"), "--socket", sock))
		})
		// And as a Claude Code user has them: the command install writes,
		// run with /bin/sh -c.
		b.Run(name+"-installed", func(b *testing.B) {
			sock := filepath.Join(dir, "run", "w1-installed.sock")
			startSidecarIn(b, dir, cfg, sock)
			command, err := harness.HookCommand(harness.ClaudeCode, filepath.Join(thinDir(b, true), "writ-hook"),
				"hook", "claude-code", "--config", cfg, "--socket", sock)
			if err != nil {
				b.Fatal(err)
			}
			cycle(b, func() *exec.Cmd { return exec.Command("/bin/sh", "-c", command) })
		})
		in, err := harness.Decode(bytes.NewReader(pre))
		if err != nil {
			b.Fatal(err)
		}
		call, _ := in.Call(harness.ClaudeCode)
		for _, path := range []string{"issuer-separate", "issuer-combined"} {
			b.Run(path, func(b *testing.B) {
				nc, err := nats.Connect(env.URL)
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				c := client.New(nc, "w1")
				call.Session = fmt.Sprint(path, "-", time.Now().UnixNano())
				src := api.SourceRequest{Channel: "tool_result", Tool: call.Tool, Session: call.Session,
					ContentDigest: strings.Repeat("ab", 32)}
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					call.CallID = fmt.Sprint(i)
					key := call.IdempotencyKey()
					src.ID = fmt.Sprintf("src-%d-%d", time.Now().UnixNano()%1e6, i)
					req := api.GrantRequest{Lane: "coordinator", Session: call.GrantSession(), Tool: call.Tool, Args: call.Args, IdempotencyKey: key}
					start := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					var env, eff grants.Envelope
					if path == "issuer-combined" {
						env, err = c.GrantSpend(ctx, req)
						if err == nil && env.Decision == grants.Permit {
							eff, err = c.EffectSource(ctx, api.EffectSourceRequest{GrantID: env.GrantID, Outcome: "confirmed", Verifier: "claude-code", Source: src})
						}
					} else {
						env, err = c.Grant(ctx, req)
						if err == nil && env.Decision == grants.Permit {
							env, err = c.Spend(ctx, api.SpendRequest{GrantID: env.GrantID, Args: call.Args, IdempotencyKey: key})
						}
						if err == nil && env.Decision == grants.Permit {
							env, err = c.Grant(ctx, req)
						}
						if err == nil && env.Decision == grants.Permit {
							eff, err = c.Effect(ctx, api.EffectRequest{GrantID: env.GrantID, Outcome: "confirmed", Verifier: "claude-code"})
						}
						if err == nil && eff.Decision == grants.Permit {
							eff, err = c.RegisterSource(ctx, src)
						}
					}
					cancel()
					times = append(times, time.Since(start))
					if err != nil || eff.Decision != grants.Permit {
						b.Fatalf("%+v %+v %v", env, eff, err)
					}
				}
				b.StopTimer()
				reportPercentiles(b, times)
			})
		}
	}
}
