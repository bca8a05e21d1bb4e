package natsbus

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
)

// Every non-issuer user hears the leader's announcements and none may
// publish one: they come from issuers only.
func TestLeaderAnnouncementsAreReadOnly(t *testing.T) {
	s := authServer(t)
	url := ClientURL(s)
	issuer, _ := connect(t, url, ClientOptions("issuer", pw)...)
	for _, user := range []string{"w1", "op", "aud"} {
		errOpt, errs := asyncErrors()
		nc, _ := connect(t, url, append(ClientOptions(user, pw), errOpt)...)
		sub, err := nc.SubscribeSync(api.SubjectLeader)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		var got *nats.Msg
		for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); {
			if err := issuer.Publish(api.SubjectLeader, []byte(`{"v":1}`)); err != nil {
				t.Fatal(err)
			}
			got, _ = sub.NextMsg(100 * time.Millisecond)
		}
		if got == nil {
			t.Fatalf("%s did not hear the leader's announcement", user)
		}
		for {
			if _, err := sub.NextMsg(50 * time.Millisecond); err != nil {
				break
			}
		}
		if err := nc.Publish(api.SubjectLeader, []byte(`{"v":1,"nats_url":"nats://evil:4222"}`)); err != nil {
			t.Fatal(err)
		}
		expectViolation(t, errs, api.SubjectLeader)
		expectNothing(t, sub, user+" announcing a leader")
	}
}
