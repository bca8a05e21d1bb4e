package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/writ-dev/writ/grants"
)

// Cron runs one command under a route lease: acquire (or renew) the
// route, run the command with the binding in its environment, renew the
// lease every third of its lifetime while the command runs, and stop the
// command (SIGTERM, then SIGKILL after Grace) the moment a renewal is
// refused or the lease would lapse unrenewed.

// ErrLeaseLost reports that a cron run lost its lease and stopped its
// command.
var ErrLeaseLost = errors.New("worker: route lease lost")

// Lease is one route lease call: action is acquire or renew. It returns
// the issuer's answer.
type Lease func(ctx context.Context, action string, gen uint64) (grants.Envelope, error)

// CronConfig configures one cron run.
type CronConfig struct {
	Route string
	Lease Lease
	Argv  []string
	// Env is added to the command's environment (the worker's identity
	// and connection, so that worker-agent calls inside act as it).
	Env   []string
	Grace time.Duration // between SIGTERM and SIGKILL
	Log   func(format string, args ...any)
}

// CronOnce acquires the route (or renews a lease the worker already
// holds), runs Argv under it and returns the command's error. A lost
// lease returns an error wrapping ErrLeaseLost; an acquire that is refused
// returns the refusal envelope with a nil error and does not run the
// command.
func CronOnce(ctx context.Context, cfg CronConfig) (grants.Envelope, error) {
	env, err := cfg.Lease(ctx, "acquire", 0)
	if err != nil || env.Decision != grants.Permit {
		return env, err
	}
	gen := env.RouteGen
	until := time.Unix(0, env.ExpiresAt)
	ttl := time.Until(until)
	if env.Kind == 0 {
		// Already the owner: renew to start the run on a full lease.
		if r, err := cfg.Lease(ctx, "renew", gen); err == nil && r.Decision == grants.Permit {
			until = time.Unix(0, r.ExpiresAt)
		}
	}
	if ttl <= 0 {
		ttl = time.Second
	}
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), cfg.Env...), RouteBinding{Route: cfg.Route, Gen: gen}.Env()...)
	if err := cmd.Start(); err != nil {
		return env, fmt.Errorf("starting %s: %w", cfg.Argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	every := max(ttl/3, 100*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return env, err
		case <-ctx.Done():
			stop(cmd, done, cfg.Grace)
			return env, ctx.Err()
		case <-tick.C:
			r, err := cfg.Lease(ctx, "renew", gen)
			switch {
			case err == nil && r.Decision == grants.Permit:
				until = time.Unix(0, r.ExpiresAt)
				continue
			case err == nil:
				stop(cmd, done, cfg.Grace)
				return r, fmt.Errorf("%w: renewal refused %s: %s", ErrLeaseLost, r.Reason, r.Detail)
			case !time.Now().Before(until):
				stop(cmd, done, cfg.Grace)
				return env, fmt.Errorf("%w: the lease expired at %s unrenewed (last error: %v)", ErrLeaseLost, until.UTC().Format(time.RFC3339), err)
			}
			if cfg.Log != nil {
				cfg.Log("renewing route %s: %v (lease runs until %s)", cfg.Route, err, until.UTC().Format(time.RFC3339))
			}
		}
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func stop(cmd *exec.Cmd, done <-chan error, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	_ = cmd.Process.Kill()
	<-done
}
