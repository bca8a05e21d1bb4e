package systems

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Children get SIGKILL when the benchmark dies (Pdeathsig). Linux sends it
// when the thread that forked the child exits, so every child is forked
// from one goroutine locked to its thread (as internal/testing/cluster does).
type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for r := range spawnCh {
				r.done <- r.cmd.Start()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd, done}
	return <-done
}

// BuildIssuer builds ./cmd/issuer of the root module (with the root
// module's own go.mod, so the issuer has production dependencies) into dir.
func BuildIssuer(root, dir string) (string, error) {
	out := filepath.Join(dir, "issuer")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/issuer")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/issuer in %s: %v\n%s", root, err, b)
	}
	return out, nil
}

// StartWritProcesses starts three `issuer serve` processes from bin, the
// way README's three-node cluster runs (embedded NATS clustered, R3
// receipt stream), without NATS auth, and waits until they serve. extra
// arguments are added to every `issuer serve`.
func StartWritProcesses(ctx context.Context, bin, dir string, payload int, extra ...string) (*Writ, error) {
	nodes, err := newNodes(dir)
	if err != nil {
		return nil, err
	}
	var peers, routes []string
	for _, n := range nodes {
		peers = append(peers, n.ID+"="+n.RaftAddr)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.ClusterPort))
	}
	type proc struct {
		cmd    *exec.Cmd
		exited chan struct{}
	}
	var procs []proc
	var pids []int
	stop := func() error {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
		return nil
	}
	for _, n := range nodes {
		if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, n.ID+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "serve", "--insecure-no-auth",
			"--node-id", n.ID, "--data-dir", n.DataDir, "--raft-addr", n.RaftAddr,
			"--peers", strings.Join(peers, ","),
			"--nats-host", "127.0.0.1", "--nats-port", fmt.Sprint(n.NATSPort),
			"--cluster-port", fmt.Sprint(n.ClusterPort), "--routes", strings.Join(routes, ","),
			"--stream-replicas", "3", "--log-level", "warn",
			"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", n.MetricsPort))
		cmd.Args = append(cmd.Args, extra...)
		cmd.Stdout, cmd.Stderr = logf, logf
		err = spawn(cmd)
		logf.Close()
		if err != nil {
			stop()
			return nil, err
		}
		p := proc{cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.exited) }()
		procs = append(procs, p)
		pids = append(pids, cmd.Process.Pid)
	}
	w := &Writ{Nodes: nodes, Mode: "processes", payload: payload, stop: stop, pids: pids}
	if err := w.connect(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Pids returns the issuer processes' ids (for RSS readings).
func (w *Writ) Pids() []int { return w.pids }
