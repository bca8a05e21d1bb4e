package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}

func newLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := Listen("test", target, WithSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestForwardAndDelay(t *testing.T) {
	l := newLink(t, echoServer(t))
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "hello", 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("healthy link: %q %v", got, err)
	}
	l.Set(Faults{Delay: 100 * time.Millisecond})
	begin := time.Now()
	if got, err := roundTrip(c, r, "slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("delayed link: %q %v", got, err)
	}
	// Both directions are delayed.
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Fatalf("round trip through a 100ms link took %s", took)
	}
	// Order is kept under jitter.
	l.Set(Faults{Jitter: 20 * time.Millisecond})
	for i := range 20 {
		msg := string(rune('a' + i))
		if got, err := roundTrip(c, r, msg, 5*time.Second); err != nil || got != msg {
			t.Fatalf("jittered link, message %d: %q %v", i, got, err)
		}
	}
}

func TestBlackholeThenHealResets(t *testing.T) {
	l := newLink(t, echoServer(t))
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, "before", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	l.Set(Faults{Blackhole: true})
	if _, err := roundTrip(c, r, "lost", 300*time.Millisecond); err == nil {
		t.Fatal("a blackholed link answered")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("want a timeout through a blackhole, got %v", err)
	}
	// A new connection is accepted but swallowed too.
	c2, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), "lost too", 300*time.Millisecond); err == nil {
		t.Fatal("a new connection through a blackhole answered")
	}
	l.Heal()
	// Both connections lost bytes: they are reset, never resumed.
	for i, cc := range []net.Conn{c, c2} {
		_ = cc.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 16)
		_, err := cc.Read(buf)
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("connection %d survived healing a blackhole: %v", i, err)
		}
	}
	// A fresh connection works.
	c3, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, bufio.NewReader(c3), "after", 2*time.Second); err != nil || got != "after" {
		t.Fatalf("healed link: %q %v", got, err)
	}
	if s := l.Stats(); s.Swallowed == 0 || s.Resets < 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestResetAndRefuse(t *testing.T) {
	l := newLink(t, echoServer(t))
	l.Set(Faults{RefuseProb: 1})
	c, err := net.Dial("tcp", l.Addr())
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a refused connection delivered data")
		}
		c.Close()
	}
	l.Set(Faults{ResetProb: 1})
	c, err = net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, bufio.NewReader(c), "x", 2*time.Second); err == nil {
		t.Fatal("a connection with ResetProb 1 answered")
	}
	if s := l.Stats(); s.Refused == 0 || s.Resets == 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestMaxConnsAndClose(t *testing.T) {
	target := echoServer(t)
	l, err := Listen("bounded", target, WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	var cs []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		if _, err := roundTrip(c, bufio.NewReader(c), "ok", 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	c, err := net.Dial("tcp", l.Addr())
	if err == nil {
		if _, err := roundTrip(c, bufio.NewReader(c), "over", 2*time.Second); err == nil {
			t.Fatal("a third connection was served past MaxConns 2")
		}
		c.Close()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection survived Close")
		}
		c.Close()
	}
	if s := l.Stats(); s.Open != 0 {
		t.Fatalf("%d connections open after Close", s.Open)
	}
}
