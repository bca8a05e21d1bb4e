package natsbus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// answeringJS is a JetStream whose stream-info answers are rewritten by
// answer, standing for whichever server of a cluster answered first.
type answeringJS struct {
	jetstream.JetStream
	answer func(*jetstream.StreamInfo)
}

func (a answeringJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := a.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	info := *st.CachedInfo()
	a.answer(&info)
	return answeredStream{st, &info}, nil
}

type answeredStream struct {
	jetstream.Stream
	info *jetstream.StreamInfo
}

func (s answeredStream) CachedInfo() *jetstream.StreamInfo { return s.info }

func peer(name string, current, offline bool) *jetstream.PeerInfo {
	return &jetstream.PeerInfo{Name: name, Current: current, Offline: offline}
}

// During a stream leader election every replica answers stream-info from
// its own copy; a replica whose store was wiped answers "empty". Such an
// answer, or one from a follower or a leader without a quorum, must not be
// taken as the stream's end: LastSeq refuses it, and Publish does not
// treat its short count as where the stream ends.
func TestLastSeqRefusesAnswersNotFromALedStream(t *testing.T) {
	js, _ := singleServer(t)
	ctx := testCtx(t, 20*time.Second)
	if got, err := NewPublisher(js).Publish(ctx, eventMsgs(1, 10)); err != nil || got != 10 {
		t.Fatalf("Publish 1..10 = %d, %v", got, err)
	}
	empty := func(ci *jetstream.ClusterInfo) func(*jetstream.StreamInfo) {
		return func(si *jetstream.StreamInfo) {
			si.State = jetstream.StreamState{}
			si.Cluster = ci
		}
	}
	stale := []struct {
		name   string
		answer func(*jetstream.StreamInfo)
	}{
		{"a wiped replica during an election", empty(&jetstream.ClusterInfo{
			Name: "c", Replicas: []*jetstream.PeerInfo{peer("n1", false, false), peer("n3", false, true)}})},
		{"a follower that knows the leader", empty(&jetstream.ClusterInfo{
			Name: "c", Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n1", true, false), peer("n3", false, true)}})},
		{"a leader with no current replica", empty(&jetstream.ClusterInfo{
			Name: "c", Leader: "n2", Replicas: []*jetstream.PeerInfo{peer("n1", false, false), peer("n3", true, true)}})},
	}
	for _, tc := range stale {
		p := NewPublisher(answeringJS{js, tc.answer})
		if last, err := p.LastSeq(ctx); !errors.Is(err, ErrStreamNotLed) {
			t.Errorf("%s: LastSeq = %d, %v; want ErrStreamNotLed", tc.name, last, err)
		}
		// Publish cannot know where the stream ends either: it fails
		// without claiming a gap.
		if tc.name != "a leader with no current replica" {
			if _, err := p.Publish(ctx, eventMsgs(11, 12)); !errors.Is(err, ErrStreamNotLed) {
				t.Errorf("%s: Publish 11..12 = %v; want ErrStreamNotLed", tc.name, err)
			}
		}
	}

	led := []struct {
		name   string
		answer func(*jetstream.StreamInfo)
	}{
		{"a single server", func(*jetstream.StreamInfo) {}},
		{"no cluster info", func(si *jetstream.StreamInfo) { si.Cluster = nil }},
		{"a leader with one of two replicas current", func(si *jetstream.StreamInfo) {
			si.Cluster = &jetstream.ClusterInfo{Name: "c", Leader: "n2",
				Replicas: []*jetstream.PeerInfo{peer("n1", true, false), peer("n3", false, true)}}
		}},
	}
	for _, tc := range led {
		if last, err := NewPublisher(answeringJS{js, tc.answer}).LastSeq(ctx); err != nil || last != 10 {
			t.Errorf("%s: LastSeq = %d, %v; want 10", tc.name, last, err)
		}
	}
	// And a leader's short answer is taken as it is: a stream that really
	// lost its tail reads short (the caller decides how long to believe it).
	truncated := func(si *jetstream.StreamInfo) {
		si.State = jetstream.StreamState{LastSeq: 4}
		si.Cluster = &jetstream.ClusterInfo{Name: "c", Leader: "n2",
			Replicas: []*jetstream.PeerInfo{peer("n1", true, false), peer("n3", true, false)}}
	}
	if last, err := NewPublisher(answeringJS{js, truncated}).LastSeq(ctx); err != nil || last != 4 {
		t.Errorf("a leader's short answer: LastSeq = %d, %v; want 4", last, err)
	}
}
