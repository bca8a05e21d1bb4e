package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/hookwire"
)

// A hosted hook is a hook command the sidecar runs in its own process for
// the thin client writ-hook (see package hookwire for the exchange). It is
// the same command a hook process would run, with the same arguments,
// stdin and (checked equal) environment, so it gives the same answer; what
// differs is recorded here:
//
//   - relative paths are taken from the hook process's working directory,
//     not the sidecar's (Agent.abs);
//   - the hook asks the issuer through the sidecar's own connection
//     instead of dialing the socket back;
//   - the sidecar declines the run, before anything is done, when the hook
//     resolves to another worker or another socket than its own: the
//     client then runs the hook itself, which reaches the right place.
//
// start marks the moment the hook may act (ask the issuer, claim a
// subagent's child, write the call's record): from then on the client
// must not run the hook a second time, so a lost answer blocks the call.

// HookRunner runs a worker-agent command line in this process, as main
// would, and returns its exit code. The sidecar runs hosted hooks with it.
type HookRunner func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// hostedHook is one hosted run, as the hook sees it.
type hostedHook struct {
	worker string    // the sidecar's worker
	socket string    // the sidecar's socket, absolute and clean
	dir    string    // the hook process's working directory
	local  authority // the sidecar's connection
	// started tells the client the hook may now act; an error means the
	// client is gone, and the hook must not act.
	started  func() error
	begun    bool
	declined string // why the sidecar will not run this hook, if it will not
}

type hostedKey struct{}

func withHosted(ctx context.Context, h *hostedHook) context.Context {
	return context.WithValue(ctx, hostedKey{}, h)
}

func hostedFrom(ctx context.Context) *hostedHook {
	h, _ := ctx.Value(hostedKey{}).(*hostedHook)
	return h
}

// Why a hosted hook stops before it acts.
var (
	// errHostedGone: the client went away before the hook began.
	errHostedGone = fmt.Errorf("%w: the hook client went away", errSidecar)
	// errHostDeclined: the sidecar will not run this hook (hostedHook.declined says why).
	errHostDeclined = fmt.Errorf("%w: declined to run the hook", errSidecar)
)

// hostBegin is called by a hook once it has resolved its worker and
// socket, before it acts. Outside the sidecar it does nothing. In it, it
// declines a hook for another worker or socket (the caller then returns
// at once: the sidecar sends the client back to run the hook itself), and
// otherwise sends the client Started.
func (g *Agent) hostBegin(af *AdapterFlags) error {
	h := g.hosted
	if h == nil || h.begun {
		return nil
	}
	switch sock := g.abs(af.socket); {
	case g.Worker != h.worker:
		h.declined = fmt.Sprintf("the hook is worker %s's; this sidecar serves %s", g.Worker, h.worker)
	case !h.serves(sock):
		h.declined = fmt.Sprintf("the hook's socket is %s; this sidecar serves %s", sock, h.socket)
	}
	if h.declined != "" {
		return errHostDeclined
	}
	h.begun = true
	return h.started()
}

// serves reports whether socket (absolute) is the sidecar's own: the same
// path, or another name of the same file (a symlinked directory).
func (h *hostedHook) serves(socket string) bool {
	if filepath.Clean(socket) == h.socket {
		return true
	}
	a, err := os.Stat(socket)
	if err != nil {
		return false
	}
	b, err := os.Stat(h.socket)
	return err == nil && os.SameFile(a, b)
}

// abs is path made absolute against the hook process's directory when the
// sidecar hosts the hook; as it is otherwise (the process's own directory
// applies).
func (g *Agent) abs(path string) string {
	if g.hosted == nil || path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(g.hosted.dir, path)
}

// hostedAuthority is the sidecar's client, for a hook it hosts. Each
// request's tries are sized to its context, as the sidecar sizes those of
// a request from the socket.
type hostedAuthority struct{ c *client.Client }

func (h hostedAuthority) sized(ctx context.Context) *client.Client {
	c := *h.c
	c.Attempt = attemptWithin(time.Until(deadlineOf(ctx)))
	return &c
}

func (h hostedAuthority) Grant(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return h.sized(ctx).Grant(ctx, r)
}

func (h hostedAuthority) Spend(ctx context.Context, r api.SpendRequest) (grants.Envelope, error) {
	return h.sized(ctx).Spend(ctx, r)
}

func (h hostedAuthority) Effect(ctx context.Context, r api.EffectRequest) (grants.Envelope, error) {
	return h.sized(ctx).Effect(ctx, r)
}

func (h hostedAuthority) RegisterSource(ctx context.Context, r api.SourceRequest) (grants.Envelope, error) {
	return h.sized(ctx).RegisterSource(ctx, r)
}

func (h hostedAuthority) GrantSpend(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return h.sized(ctx).GrantSpend(ctx, r)
}

func (h hostedAuthority) EffectSource(ctx context.Context, r api.EffectSourceRequest) (grants.Envelope, error) {
	return h.sized(ctx).EffectSource(ctx, r)
}

func (hostedAuthority) Close() {}

// hostHook answers one hook.run request on conn: Started once the hook
// may act, then its answer; or a refusal, before Started only. It reports
// whether the connection can carry another request.
func (s *sidecar) hostHook(ctx context.Context, conn net.Conn, req *sidecarRequest) bool {
	decline := func(why string) bool {
		return s.reply(conn, sidecarResponse{Code: hookwire.CodeDeclined, Error: why})
	}
	if s.runHook == nil {
		return decline("this sidecar does not run hooks")
	}
	run, err := hookwire.DecodeRun(req.Body)
	if err != nil {
		return s.reply(conn, sidecarResponse{Code: sidecarBadRequest, Error: err.Error()})
	}
	if diff := hookwire.EnvDiff(run.Env, hookwire.Env(os.Environ())); len(diff) > 0 {
		return decline("the hook's environment differs from the sidecar's in " + strings.Join(diff, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, req.timeout())
	defer cancel()
	h := &hostedHook{
		worker: s.worker, socket: s.socket, dir: filepath.Clean(run.Dir),
		local: hostedAuthority{c: s.client},
		started: func() error {
			if !s.reply(conn, sidecarResponse{Started: true}) {
				return errHostedGone
			}
			return nil
		},
	}
	var stdout, stderr bytes.Buffer
	code := s.runHook(withHosted(ctx, h), run.Args, bytes.NewReader(run.Stdin), &stdout, &stderr)
	if h.declined != "" && !h.begun {
		return decline(h.declined)
	}
	return s.reply(conn, sidecarResponse{Hook: &hookwire.Answer{Stdout: stdout.Bytes(), Stderr: stderr.String(), Exit: code}})
}
