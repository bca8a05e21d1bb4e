package issuer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/telemetry"
)

// EnableMetrics registers this node's metrics on reg (see package
// telemetry: requests, decisions, refusals by reason, commit and spend
// latency, raft state, outbox depth, stream lag). It may be called once, before or while
// the service runs; until then the service records nothing.
func (s *Service) EnableMetrics(reg prometheus.Registerer) {
	s.metrics.Store(telemetry.NewIssuer(reg, s.node.ID(), telemetry.IssuerGauges{
		RaftState: func() string { return s.node.Raft().State().String() },
		Outbox: func() float64 {
			var n int
			s.node.View(func(st *fsm.State, _ uint64) { n = st.OutboxLen() })
			return float64(n)
		},
		StreamLag: func() float64 {
			var seq uint64
			s.node.View(func(st *fsm.State, _ uint64) { seq = st.Chain().Seq })
			s.mu.Lock()
			in := s.streamSeq
			s.mu.Unlock()
			if seq <= in {
				return 0
			}
			return float64(seq - in)
		},
	}))
}

// observe records one answered request. lane is the request's lane (a
// grant request's; "" otherwise), commit the time its command took to
// commit (0 when it was answered without proposing).
func (s *Service) observe(op string, env *grants.Envelope, lane string, commit time.Duration) {
	s.metrics.Load().Request(op, string(env.Decision), string(env.Reason), lane, env.Consequence, commit)
}

// clock reads the wall clock for a latency only while metrics are on, so
// a node without them pays nothing for them.
func (s *Service) clock() time.Time {
	if s.metrics.Load() == nil {
		return time.Time{}
	}
	return time.Now()
}

// since is the time elapsed from t, a clock reading (0 when metrics were
// off when it was taken).
func (s *Service) since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}
