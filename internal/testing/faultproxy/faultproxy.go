// Package faultproxy is a TCP proxy for fault-injection tests. A Link
// listens on a loopback port and forwards every connection it accepts to
// one target address; at any moment a test can make the link slow (delay
// and jitter), flaky (connections reset at random), or dead (a blackhole
// that swallows bytes silently, like a network partition), and heal it
// again.
//
// A cluster under test is wired so that node i reaches node j only through
// its own Link i->j (see internal/cluster), which makes every fault
// per-link and directional, without touching the processes.
//
// Everything is bounded: a link holds at most MaxConns connections, each
// direction of a connection buffers at most QueueChunks chunks of at most
// ChunkSize bytes, and Close stops every goroutine the link started.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits.
const (
	// ChunkSize bounds one read, and so the unit of delay and reset.
	ChunkSize = 32 << 10
	// QueueChunks bounds the chunks in flight per direction of one
	// connection; a full queue stops reading (TCP back-pressure).
	QueueChunks = 64
	// DefaultMaxConns bounds the open connections of one link; further
	// connections are reset at once.
	DefaultMaxConns = 128
	// DialTimeout bounds connecting to the target.
	DialTimeout = 2 * time.Second
)

// Faults is what a link does to the traffic through it. The zero value
// forwards everything unchanged.
type Faults struct {
	// Delay is added to every chunk in both directions; Jitter adds a
	// uniformly random extra in [0, Jitter). Order within a direction is
	// kept (a chunk never overtakes an earlier one).
	Delay  time.Duration
	Jitter time.Duration
	// ResetProb is the chance, per chunk, that the whole connection is
	// reset (RST to both sides) instead of forwarding it.
	ResetProb float64
	// RefuseProb is the chance that a new connection is reset at once.
	RefuseProb float64
	// Blackhole swallows every byte in both directions without closing
	// anything, like a partition: peers see silence, then their own
	// timeouts. New connections are accepted and swallowed too. When the
	// blackhole is lifted, every connection that lost bytes is reset (its
	// stream can never be resumed), so nothing corrupt is ever delivered.
	Blackhole bool
}

// Healthy reports whether f forwards everything unchanged.
func (f Faults) Healthy() bool { return f == Faults{} }

func (f Faults) String() string {
	if f.Healthy() {
		return "healthy"
	}
	if f.Blackhole {
		return "blackhole"
	}
	return fmt.Sprintf("delay=%s+%s reset=%.3f refuse=%.3f", f.Delay, f.Jitter, f.ResetProb, f.RefuseProb)
}

// Stats counts what a link did.
type Stats struct {
	Accepted  int64 // connections accepted
	Refused   int64 // connections reset at once (RefuseProb, MaxConns, dial failure)
	Resets    int64 // connections reset mid-stream (ResetProb, healing a blackhole, ResetAll)
	Forwarded int64 // bytes forwarded
	Swallowed int64 // bytes dropped by a blackhole
	Open      int   // connections open now
}

// Option tunes a link.
type Option func(*Link)

// WithSeed seeds the link's random choices (jitter, resets, refusals).
func WithSeed(seed int64) Option { return func(l *Link) { l.rng = rand.New(rand.NewSource(seed)) } }

// WithMaxConns bounds the link's open connections.
func WithMaxConns(n int) Option {
	return func(l *Link) {
		if n > 0 {
			l.maxConns = n
		}
	}
}

// Link is one directional proxy: connections to Addr go to Target.
type Link struct {
	Name   string
	Target string

	ln       net.Listener
	maxConns int

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
	conns  map[*pipe]struct{}
	closed bool

	accepted, refused, resets, forwarded, swallowed atomic.Int64

	wg sync.WaitGroup
}

// Listen starts a link on a free loopback port forwarding to target.
func Listen(name, target string, opts ...Option) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy %s: %w", name, err)
	}
	l := &Link{
		Name: name, Target: target, ln: ln, maxConns: DefaultMaxConns,
		rng: rand.New(rand.NewSource(1)), conns: map[*pipe]struct{}{},
	}
	for _, o := range opts {
		o(l)
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr is the host:port to dial instead of Target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Faults returns the link's current faults.
func (l *Link) Faults() Faults {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.faults
}

// Set replaces the link's faults; existing connections follow at once.
func (l *Link) Set(f Faults) {
	l.mu.Lock()
	was := l.faults.Blackhole
	l.faults = f
	var lost []*pipe
	if was && !f.Blackhole {
		for p := range l.conns {
			if p.tainted.Load() {
				lost = append(lost, p)
			}
		}
	}
	l.mu.Unlock()
	for _, p := range lost {
		l.resets.Add(1)
		p.reset()
	}
}

// Heal removes every fault.
func (l *Link) Heal() { l.Set(Faults{}) }

// ResetAll resets every open connection.
func (l *Link) ResetAll() {
	l.mu.Lock()
	ps := make([]*pipe, 0, len(l.conns))
	for p := range l.conns {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	for _, p := range ps {
		l.resets.Add(1)
		p.reset()
	}
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	return Stats{
		Accepted: l.accepted.Load(), Refused: l.refused.Load(), Resets: l.resets.Load(),
		Forwarded: l.forwarded.Load(), Swallowed: l.swallowed.Load(), Open: open,
	}
}

// Close stops the listener, resets every connection and waits for every
// goroutine of the link to finish. It is safe to call more than once.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	ps := make([]*pipe, 0, len(l.conns))
	for p := range l.conns {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for _, p := range ps {
		p.reset()
	}
	l.wg.Wait()
	return err
}

// roll draws a uniform float in [0,1) under the lock.
func (l *Link) roll() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.Float64()
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		l.mu.Lock()
		f, closed, full := l.faults, l.closed, len(l.conns) >= l.maxConns
		refuse := !closed && !full && f.RefuseProb > 0 && l.rng.Float64() < f.RefuseProb
		l.mu.Unlock()
		if closed || full || refuse {
			l.refused.Add(1)
			rst(c)
			continue
		}
		l.accepted.Add(1)
		p := &pipe{link: l, a: c, done: make(chan struct{})}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			rst(c)
			continue
		}
		l.conns[p] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go p.run()
	}
}

// rst closes c with a TCP reset rather than a FIN.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// pipe is one proxied connection: a is the accepted side, b the target.
type pipe struct {
	link *Link
	a    net.Conn

	mu   sync.Mutex
	b    net.Conn
	once sync.Once
	done chan struct{}
	// tainted: a blackhole swallowed bytes of this connection.
	tainted atomic.Bool
}

// close tears the connection down gracefully (after both directions ended).
func (p *pipe) close() {
	p.once.Do(func() {
		close(p.done)
		_ = p.a.Close()
		p.mu.Lock()
		if p.b != nil {
			_ = p.b.Close()
		}
		p.mu.Unlock()
	})
}

// reset tears the connection down with RST on both sides.
func (p *pipe) reset() {
	p.once.Do(func() {
		close(p.done)
		rst(p.a)
		p.mu.Lock()
		if p.b != nil {
			rst(p.b)
		}
		p.mu.Unlock()
	})
}

func (p *pipe) run() {
	l := p.link
	defer func() {
		p.reset()
		l.mu.Lock()
		delete(l.conns, p)
		l.mu.Unlock()
		l.wg.Done()
	}()
	// A connection accepted while the link is a blackhole is swallowed
	// until the blackhole lifts (then reset, as it lost bytes) or the
	// peer gives up.
	if l.Faults().Blackhole {
		p.tainted.Store(true)
		buf := make([]byte, ChunkSize)
		for {
			n, err := p.a.Read(buf)
			l.swallowed.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
	b, err := net.DialTimeout("tcp", l.Target, DialTimeout)
	if err != nil {
		l.refused.Add(1)
		return
	}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		rst(b)
		return
	default:
	}
	p.b = b
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.direction(p.a, b) }()
	go func() { defer wg.Done(); p.direction(b, p.a) }()
	wg.Wait()
	p.close() // no-op after a reset
}

type chunk struct {
	data []byte
	due  time.Time
}

// direction copies src to dst through the link's faults. A reset or an
// error on either side tears the whole connection down; a clean EOF is
// passed on as a half-close once the queued bytes are written.
func (p *pipe) direction(src, dst net.Conn) {
	l := p.link
	q := make(chan chunk, QueueChunks)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-p.done:
					return
				}
			}
			if _, err := dst.Write(c.data); err != nil {
				p.reset()
				return
			}
			l.forwarded.Add(int64(len(c.data)))
		}
	}()
	eof := false
	defer func() {
		close(q)
		<-writerDone
		if eof {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}
	}()
	var lastDue time.Time
	for {
		buf := make([]byte, ChunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			f := l.faults
			var jitter time.Duration
			if f.Jitter > 0 {
				jitter = time.Duration(l.rng.Int63n(int64(f.Jitter)))
			}
			reset := f.ResetProb > 0 && l.rng.Float64() < f.ResetProb
			l.mu.Unlock()
			switch {
			case f.Blackhole:
				p.tainted.Store(true)
				l.swallowed.Add(int64(n))
				continue
			case reset:
				l.resets.Add(1)
				p.reset()
				return
			}
			due := time.Now().Add(f.Delay + jitter)
			if due.Before(lastDue) {
				due = lastDue
			}
			lastDue = due
			select {
			case q <- chunk{data: buf[:n], due: due}:
			case <-p.done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				eof = true
			} else {
				p.reset()
			}
			return
		}
	}
}
