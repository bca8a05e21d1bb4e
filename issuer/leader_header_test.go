package issuer_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"

	"github.com/writ-dev/writ/internal/testing/testenv"
)

// With AdvertiseNATS set, the leader's answers to worker requests carry it
// in api.HeaderLeaderNATS and its status reports it as nats_url; without
// it, answers carry no header and status no URL. With it, the leader
// announces it on api.SubjectLeader.
func TestLeaderNamesItsNATSServer(t *testing.T) {
	const adv = "nats://issuer-1.example:4222"
	for _, want := range []string{adv, ""} {
		env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) { c.AdvertiseNATS = want })
		nc := dial(t, env.URL)
		if want != "" {
			// Announced on writ.leader every AnnounceEvery.
			sub, err := nc.SubscribeSync(api.SubjectLeader)
			if err != nil {
				t.Fatal(err)
			}
			am, err := sub.NextMsg(issuer.AnnounceEvery + 10*time.Second)
			if err != nil {
				t.Fatalf("no announcement: %v", err)
			}
			var la api.LeaderAnnouncement
			if err := json.Unmarshal(am.Data, &la); err != nil || la.NATSURL != want || la.Node == "" || la.Term == 0 || la.V != api.Version {
				t.Errorf("announcement %s: %+v %v", am.Data, la, err)
			}
		}
		m, err := nc.Request(api.WorkerSubject("w1", api.OpSpend), []byte(`{"v":1,"grant_id":"nope","idempotency_key":"k"}`), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(api.HeaderLeaderNATS); got != want {
			t.Errorf("AdvertiseNATS %q: answer header %q", want, got)
		}
		sm, err := nc.Request(api.SubjectStatus, []byte(`{"v":1}`), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var st api.Status
		if err := json.Unmarshal(sm.Data, &st); err != nil {
			t.Fatal(err)
		}
		if st.NATSURL != want {
			t.Errorf("AdvertiseNATS %q: status nats_url %q", want, st.NATSURL)
		}
	}
}
