package issuer

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Resent operator requests. A client tries a request for a bounded time
// and sends it again when no answer came (api/client's Attempt). Grants,
// spends and effects carry idempotency keys the state machine reads; an
// operator command does not, so a policy apply whose commit outlasted one
// try was applied twice (two epochs) and a resent approval was answered
// "no open review" although it had been approved.
//
// The leader keeps the operator requests it is committing and the answers
// it gave since the last different one, keyed by subject and body, for at
// most resentWindow: the same bytes again are answered with the first
// answer, or wait for it while it is still being committed. A different
// request ends the kept answers, so a document applied, another applied,
// then the first applied again (a rollback) is three changes, never an
// old answer. Only committed answers are kept (issuer_unavailable is not:
// the client must be free to try again), and only on the node that
// answered, so a resend to a new leader after a failover is proposed
// again. A relayed reply is not kept: the state machine knows a reply it
// has seen and records the repeat.

// resentWindow is how long an operator request's answer is kept: longer
// than a client keeps trying one call (the CLI's --timeout is 10 s by
// default).
const resentWindow = 60 * time.Second

// maxResent bounds the requests kept while being committed.
const maxResent = 512

type resentKey [sha256.Size]byte

// resentEntry is one operator request: done is closed when env is set.
type resentEntry struct {
	key  resentKey
	at   time.Time
	done chan struct{}
	env  grants.Envelope
	kept bool // env is a committed answer
}

// resentCache holds the operator requests being committed and the
// answered ones since the last different request.
type resentCache struct {
	mu      sync.Mutex
	entries map[resentKey]*resentEntry
}

func resentKeyOf(subject string, body []byte) resentKey {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(body)
	var k resentKey
	h.Sum(k[:0])
	return k
}

// begin returns the entry of an earlier identical request (first false),
// or registers this one (first true) for finish; a new request ends the
// answers kept so far, and answers older than resentWindow are dropped.
func (c *resentCache) begin(k resentKey, now time.Time) (e *resentEntry, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[resentKey]*resentEntry{}
	}
	if e, ok := c.entries[k]; ok && now.Sub(e.at) <= resentWindow {
		return e, false
	}
	for key, old := range c.entries {
		select {
		case <-old.done:
			delete(c.entries, key) // answered: stands no longer
		default:
			if now.Sub(old.at) > resentWindow || len(c.entries) > maxResent {
				delete(c.entries, key)
			}
		}
	}
	e = &resentEntry{key: k, at: now, done: make(chan struct{})}
	c.entries[k] = e
	return e, true
}

// finish records the first request's answer. An answer that is not a
// committed result forgets the request, so that a resend is proposed.
func (c *resentCache) finish(e *resentEntry, env grants.Envelope) {
	c.mu.Lock()
	e.env = env
	e.kept = env.Reason != grants.ReasonIssuerUnavail
	if !e.kept && c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.mu.Unlock()
	close(e.done)
}

// wait returns the first request's answer once it is there (ok), or false
// when it was not a committed answer or did not come within d.
func (e *resentEntry) wait(d time.Duration) (grants.Envelope, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.done:
		return e.env, e.kept
	case <-t.C:
		return grants.Envelope{}, false
	}
}

// answerOperator proposes an operator command and answers m, or answers a
// resend of a request already proposed with that request's answer. It
// returns the answer sent.
func (s *Service) answerOperator(m *nats.Msg, cmd fsm.Command) grants.Envelope {
	if m.Subject == api.SubjectReviewReply {
		return s.propose(m, cmd) // the state machine records a repeat itself
	}
	key := resentKeyOf(m.Subject, m.Data)
	prior, first := s.resent.begin(key, time.Now())
	if !first {
		// The same request again, as a client sends it when its try
		// timed out: the first one's answer, not a second change.
		env, ok := prior.wait(s.cfg.CommitTimeout)
		if !ok {
			prior, first = s.resent.begin(key, time.Now())
		}
		if !first {
			if !ok {
				// Still not answered: let the client try again later.
				env = grants.Refuse(grants.ReasonIssuerUnavail, "commit", "the same request is still being committed; "+grants.KeptUnconfirmed)
			}
			s.respond(m, env)
			return env
		}
	}
	env := s.propose(m, cmd)
	s.resent.finish(prior, env)
	return env
}
