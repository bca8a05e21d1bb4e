package raftnode

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Transport parameters.
const (
	transportPool    = 3
	transportTimeout = 10 * time.Second
	// handshakeTimeout bounds a TLS handshake on an accepted connection.
	handshakeTimeout = 5 * time.Second
	// maxHandshakes bounds the handshakes in progress at once; further
	// connections wait in the kernel's accept queue.
	maxHandshakes = 64
)

// newTransport builds the raft transport: plain TCP, or mutual TLS when
// cfg.TLS is set. Either way a dial to an address listed in cfg.DialAddrs
// goes to its replacement instead.
func newTransport(cfg Config, adv net.Addr, lg hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", cfg.RaftBind)
	if err != nil {
		return nil, err
	}
	var stream raft.StreamLayer
	if cfg.TLS != nil {
		srv, cli, err := cfg.TLS.load()
		if err != nil {
			ln.Close()
			return nil, err
		}
		stream = newTLSStream(ln, adv, srv, cli, cfg.DialAddrs, lg.Named("tls"))
	} else {
		stream = &tcpStream{ln: ln, adv: adv, redirect: cfg.DialAddrs}
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: transportPool, Timeout: transportTimeout, Logger: lg,
	}), nil
}

// dialTarget applies a redirect.
func dialTarget(redirect map[string]string, address raft.ServerAddress) string {
	if to, ok := redirect[string(address)]; ok {
		return to
	}
	return string(address)
}

// tcpStream is raft's plain TCP stream layer with dial redirects.
type tcpStream struct {
	ln       net.Listener
	adv      net.Addr
	redirect map[string]string
}

func (s *tcpStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tcpStream) Close() error              { return s.ln.Close() }
func (s *tcpStream) Addr() net.Addr            { return s.adv }

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", dialTarget(s.redirect, address), timeout)
}

// errStreamClosed is returned by Accept after Close.
var errStreamClosed = errors.New("raftnode: transport closed")

// streamAcceptor hands handshaken connections to Accept. It is shared by
// stream layers that must vet a connection before raft sees it.
type streamAcceptor struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	sem   chan struct{}

	mu      sync.Mutex
	vetting map[net.Conn]struct{} // closed by Close
}

func newStreamAcceptor(ln net.Listener) *streamAcceptor {
	return &streamAcceptor{
		ln: ln, conns: make(chan net.Conn), done: make(chan struct{}),
		sem: make(chan struct{}, maxHandshakes), vetting: map[net.Conn]struct{}{},
	}
}

// run accepts connections and vets each with vet in its own goroutine
// (at most maxHandshakes at once); vetted connections go to Accept.
func (a *streamAcceptor) run(vet func(net.Conn) (net.Conn, error), refused func(net.Conn, error)) {
	defer a.wg.Done()
	for {
		select {
		case a.sem <- struct{}{}:
		case <-a.done:
			return
		}
		c, err := a.ln.Accept()
		if err != nil {
			<-a.sem
			select {
			case <-a.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		a.mu.Lock()
		a.vetting[c] = struct{}{}
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() { <-a.sem }()
			vc, err := vet(c)
			a.mu.Lock()
			delete(a.vetting, c)
			a.mu.Unlock()
			if err != nil {
				refused(c, err)
				_ = c.Close()
				return
			}
			select {
			case a.conns <- vc:
			case <-a.done:
				_ = vc.Close()
			}
		}()
	}
}

func (a *streamAcceptor) Accept() (net.Conn, error) {
	select {
	case c := <-a.conns:
		return c, nil
	case <-a.done:
		return nil, errStreamClosed
	}
}

func (a *streamAcceptor) Close() error {
	var err error
	a.once.Do(func() {
		close(a.done)
		err = a.ln.Close()
		a.mu.Lock()
		for c := range a.vetting {
			_ = c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
	return err
}

func describeConn(c net.Conn) string {
	if c == nil || c.RemoteAddr() == nil {
		return "?"
	}
	return fmt.Sprint(c.RemoteAddr())
}
