package testenv

import (
	"net"
	"sync/atomic"
	"testing"
)

// Tripwire is a TCP listener on 127.0.0.1 that counts connections and
// closes them at once. Tests point a command at its URL to prove that a
// usage error was caught before anything dialled.
func Tripwire(t testing.TB) (url string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return "nats://" + l.Addr().String(), accepted
}
