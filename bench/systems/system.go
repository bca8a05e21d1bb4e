// Package systems starts the three systems the benchmark compares, on
// loopback only, and gives each the same two operations: mint a ticket
// (writ: request -> permit) and spend it (single-spend compare-and-set).
package systems

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// System is one system under test. A round is n fresh tickets: Mint(i)
// creates ticket i of the round, Spend(i, client) tries to spend it through
// client 0 or 1 (two independent connections).
type System interface {
	Name() string
	NewRound(tag string, n int)
	Mint(ctx context.Context, i int) (bool, error)
	Spend(ctx context.Context, i, client int) (bool, error)
	Close() error
}

// Payload returns the request arguments every system carries for ticket i:
// a JSON object of exactly size bytes (the same bytes are writ's tool-call
// args and the etcd / KV ticket value).
func Payload(tag string, i, size int) []byte {
	head := fmt.Sprintf(`{"command":"echo %s-%d `, tag, i)
	pad := size - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

// FreePorts returns n distinct free loopback ports (all listeners are held
// until every port is chosen, as internal/testing/cluster does).
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
