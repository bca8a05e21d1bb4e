package connect

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
)

// Leader affinity. In an issuer cluster every node embeds a NATS server,
// and only the raft leader's issuer subscribes to the API subjects: a
// request entering at a follower's server crosses a route to the leader's
// server and its answer crosses back. A connection with leader affinity
// enters at the leader's server instead. The leader names its server's
// client URL on its answers (the api.HeaderLeaderNATS header), in its
// status (api.Status.NATSURL) and in announcements on api.SubjectLeader
// (which connections hear between requests, once they made one); when that URL is one of the servers the
// connection was given and not the one it is connected to, the connection
// reconnects there:
//
//   - only to a URL it was given (by host and port): a leader advertising
//     an address the client was not told about is reached through routing
//     as before;
//   - at most once per AffinityEvery, counting the connection's opening
//     as a move, so a leader that keeps changing cannot make clients
//     reconnect in a loop and a process that lives less than that (a
//     hook) never reconnects;
//   - never to a server the connection lost (a broken or stalled
//     connection) within the last FailedServerPause: a leader whose server
//     this client cannot reach is reached through another one;
//   - after the requests in flight on it have been answered (or timed
//     out): the move waits for them, and requests made meanwhile wait for
//     the move to start, then go out once reconnected. A request whose
//     answer is lost all the same (its server died) is retried by package
//     api/client with the same idempotency key, and a retry of an applied
//     request gets its original answer.
//
// Failover is unchanged: the connection keeps every server it was given,
// and a dead or stalled server is left within StallDetection for another
// one; answers from the new leader then bring it to the new leader's
// server.

// EnvLeaderAffinity turns leader affinity off when set to a false value
// ("0", "false", "off", "no"); --nats-leader-affinity overrides it.
const EnvLeaderAffinity = "WRIT_NATS_LEADER_AFFINITY"

// DefaultAffinityEvery is the least time between two moves of one
// connection.
const DefaultAffinityEvery = 2 * time.Second

// FailedServerPause is how long a connection does not move to a server it
// lost.
const FailedServerPause = 30 * time.Second

// LeaderAffinityFromEnv is --nats-leader-affinity's default: on unless
// EnvLeaderAffinity says off.
func LeaderAffinityFromEnv() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvLeaderAffinity))) {
	case "0", "false", "off", "no":
		return false
	}
	return true
}

// Affinity moves one connection to the leader's server; Dial makes one
// when Options.LeaderAffinity is set and the URL lists several servers,
// and AffinityOf finds it. Its methods are safe for concurrent use, and a
// nil *Affinity does nothing.
type Affinity struct {
	nc    atomic.Pointer[nats.Conn]
	given map[string]bool // host:port of every URL the connection was given
	every time.Duration

	// gate is held shared by each request in flight and exclusively by a
	// move while it starts the reconnection.
	gate sync.RWMutex
	// at is the last hint found to name the server connected to, until
	// the connection next moves or breaks: the answers' common case, seen
	// without taking a lock.
	at atomic.Pointer[string]
	// gen counts (re)connections and disconnections: a hint read against
	// an older connection is not cached in at.
	gen atomic.Uint64
	// listen subscribes to the leader's announcements once.
	listen sync.Once

	mu       sync.Mutex
	hint     string // the last hint seen,
	conn     string // the URL connected to when it was seen,
	hintHP   string // the hint's host:port ("" when it does not parse),
	same     bool   // and whether it names the connected server
	target   string // host:port the next reconnection picks ("" none)
	lastMove time.Time
	moving   bool
	moves    uint64
	current  string               // host:port connected to, as of the last (re)connection
	lost     map[string]time.Time // when the connection lost each server
}

// newAffinity returns an Affinity for a connection given the URLs in
// list (comma separated), or nil when it lists fewer than two servers.
func newAffinity(list string, every time.Duration) *Affinity {
	given := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		if hp := hostPort(part); hp != "" {
			given[hp] = true
		}
	}
	if len(given) < 2 {
		return nil
	}
	if every <= 0 {
		every = DefaultAffinityEvery
	}
	return &Affinity{given: given, every: every, lost: map[string]time.Time{}}
}

// affinities maps each open connection Dial made with leader affinity to
// its Affinity.
var affinities sync.Map // *nats.Conn -> *Affinity

// AffinityOf returns the Affinity of a connection Dial made, or nil when
// it has none (leader affinity off, a single server, or a connection Dial
// did not make). A closed connection has none.
func AffinityOf(nc *nats.Conn) *Affinity {
	if nc == nil {
		return nil
	}
	a, ok := affinities.Load(nc)
	if !ok {
		return nil
	}
	if nc.IsClosed() { // its ClosedHandler may not have run yet
		affinities.Delete(nc)
		return nil
	}
	return a.(*Affinity)
}

// options are the nats.Connect options the Affinity needs.
func (a *Affinity) options() []nats.Option {
	return []nats.Option{
		nats.ReconnectToServer(a.pick),
		nats.ClosedHandler(func(nc *nats.Conn) { affinities.Delete(nc) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { a.connected(nc) }),
		// Called, in order with ReconnectHandler, with a nil error for a
		// move and the cause for a lost connection.
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			a.mu.Lock()
			a.gen.Add(1)
			a.at.Store(nil)
			if err != nil && a.current != "" {
				a.lost[a.current] = time.Now()
			}
			a.mu.Unlock()
		}),
	}
}

// connected records the server the connection is at.
func (a *Affinity) connected(nc *nats.Conn) {
	hp := hostPort(nc.ConnectedUrl())
	a.mu.Lock()
	a.gen.Add(1)
	a.at.Store(nil)
	a.current = hp
	a.mu.Unlock()
}

// bind attaches the Affinity to its connection once connected.
func (a *Affinity) bind(nc *nats.Conn) {
	a.nc.Store(nc)
	a.connected(nc)
	// Connecting counts as a move: a connection moves no sooner than
	// AffinityEvery after it opened, so a short-lived process (a hook
	// making a request or two) never pays a reconnection.
	a.mu.Lock()
	a.lastMove = time.Now()
	a.mu.Unlock()
	affinities.Store(nc, a)
	if nc.IsClosed() { // closed before it was stored
		affinities.Delete(nc)
	}
}

// subscribe follows the leader's announcements, so that a connection
// between requests moves too. It starts with the first request: a
// connection that never makes one (an auditor reading the receipt
// stream) has nothing to gain at the leader's server. A server or
// credential that does not allow the subscription refuses it (an
// asynchronous permissions error); answers still carry the hint.
func (a *Affinity) subscribe(nc *nats.Conn) {
	_, _ = nc.Subscribe(api.SubjectLeader, func(m *nats.Msg) {
		var la api.LeaderAnnouncement
		if json.Unmarshal(m.Data, &la) == nil {
			a.Hint(la.NATSURL)
		}
	})
}

// pick is the connection's reconnection choice: the leader's server, once,
// after a move; otherwise (nil) the client library's own rotation.
func (a *Affinity) pick(servers []nats.Server, _ nats.ServerInfo) (*nats.Server, time.Duration) {
	a.mu.Lock()
	t := a.target
	a.target = ""
	a.mu.Unlock()
	if t == "" {
		return nil, 0
	}
	for i := range servers {
		if servers[i].URL != nil && hostPort(servers[i].URL.String()) == t {
			return &servers[i], 0
		}
	}
	return nil, 0
}

// Request is nc.RequestWithContext, made while no move is starting, and
// it takes the leader's URL from the answer's header named header, if
// any, as a Hint. nc must be the Affinity's connection; for another one
// (or a nil Affinity) it is a plain request.
func (a *Affinity) Request(ctx context.Context, nc *nats.Conn, subj string, payload []byte, header string) (*nats.Msg, error) {
	if a == nil || nc != a.nc.Load() {
		return nc.RequestWithContext(ctx, subj, payload)
	}
	a.listen.Do(func() { a.subscribe(nc) })
	a.gate.RLock()
	msg, err := nc.RequestWithContext(ctx, subj, payload)
	a.gate.RUnlock()
	if err == nil && msg.Header != nil {
		if u := msg.Header.Get(header); u != "" {
			a.Hint(u)
		}
	}
	return msg, err
}

// Hint tells the Affinity that the leader's server has client URL u. When
// u is one of the connection's servers, not the one it is connected to,
// and the last move was at least AffinityEvery ago, the connection moves
// there (in the background).
func (a *Affinity) Hint(u string) {
	if a == nil || u == "" {
		return
	}
	if at := a.at.Load(); at != nil && *at == u {
		return
	}
	nc := a.nc.Load()
	if nc == nil {
		return
	}
	gen := a.gen.Load()
	cur := nc.ConnectedUrl()
	a.mu.Lock()
	if u != a.hint || cur != a.conn {
		a.hint, a.conn, a.hintHP = u, cur, hostPort(u)
		a.same = a.hintHP != "" && a.hintHP == hostPort(cur)
	}
	if a.same && cur != "" && !a.moving && a.gen.Load() == gen {
		a.at.Store(&u)
	}
	if a.same || cur == "" || a.hintHP == "" || !a.given[a.hintHP] || a.moving ||
		(!a.lastMove.IsZero() && time.Since(a.lastMove) < a.every) {
		a.mu.Unlock()
		return
	}
	if at, ok := a.lost[a.hintHP]; ok {
		if time.Since(at) < FailedServerPause {
			a.mu.Unlock()
			return
		}
		delete(a.lost, a.hintHP)
	}
	a.moving, a.lastMove, a.target = true, time.Now(), a.hintHP
	a.at.Store(nil)
	a.mu.Unlock()
	go a.move(nc)
}

// move waits for the requests in flight, then reconnects to the target.
func (a *Affinity) move(nc *nats.Conn) {
	a.gate.Lock()
	err := nc.ForceReconnect()
	a.gate.Unlock()
	a.mu.Lock()
	a.moving = false
	if err != nil {
		a.target = ""
	} else {
		a.moves++
	}
	a.mu.Unlock()
}

// Moves is how many times the connection was moved to a leader's server.
func (a *Affinity) Moves() uint64 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.moves
}

// hostPort is the lower-cased host:port of a NATS URL (scheme optional,
// port 4222 when absent), or "" when it does not parse.
func hostPort(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(4222)
	}
	hp := net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	if _, _, err := net.SplitHostPort(hp); err != nil {
		return ""
	}
	return hp
}
