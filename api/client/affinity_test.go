package client

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
)

// A client over a connection connect.Dial gave leader affinity follows the
// server the answers name (api.HeaderLeaderNATS), and one over a plain
// connection has no affinity. Two independent servers stand for a
// follower's and the leader's: each answers every spend.
func TestClientFollowsTheLeaderHeader(t *testing.T) {
	follower, leader := startNATS(t), startNATS(t)
	for _, s := range []interface{ ClientURL() string }{follower, leader} {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if _, err := nc.Subscribe(api.WorkerSubject("w1", api.OpSpend), func(m *nats.Msg) {
			env := grants.Refuse(grants.ReasonAlreadySpent, "spend", "test")
			out := nats.NewMsg(m.Reply)
			out.Data = env.AppendJSON(nil)
			out.Header.Set(api.HeaderLeaderNATS, leader.ClientURL())
			_ = m.RespondMsg(out)
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if c := New(dial(t, follower), "w1"); c.Leader != nil {
		t.Fatal("leader affinity on a connection connect.Dial did not make")
	}
	urls := follower.ClientURL() + "," + leader.ClientURL()
	var nc *nats.Conn
	for range 50 { // the client library shuffles the list: start at the follower
		var err error
		if nc, err = (connect.Options{URL: urls, Timeout: 10 * time.Second, LeaderAffinity: true}).Dial(); err != nil {
			t.Fatal(err)
		}
		if nc.ConnectedUrl() == follower.ClientURL() {
			break
		}
		nc.Close()
	}
	defer nc.Close()
	c := New(nc, "w1")
	if c.Leader == nil {
		t.Fatal("no leader affinity on a connection given two servers")
	}
	deadline := time.Now().Add(10 * time.Second)
	for nc.ConnectedUrl() != leader.ClientURL() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		env, err := c.Spend(ctx, api.SpendRequest{GrantID: "g1", IdempotencyKey: "k1"})
		cancel()
		if err != nil || env.Reason != grants.ReasonAlreadySpent {
			t.Fatalf("spend: %v %+v", err, env)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still at %s, not at the leader's %s", nc.ConnectedUrl(), leader.ClientURL())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.Leader.Moves() != 1 {
		t.Errorf("%d moves, want 1", c.Leader.Moves())
	}
}
