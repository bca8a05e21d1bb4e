package fsm

import (
	"fmt"
	"slices"
	"sort"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// ExpiryRemovals pops a copy of s's expiry queue to the end and returns, in
// pop order, every removal prune would make ("time kind key"), applying
// prune's rules to copies of the retention times s holds; s is unchanged.
// left lists the entries no item would ever remove (sorted): it must be
// empty, or the state would hold them forever.
func ExpiryRemovals(s *State) (removed, left []string) {
	until := map[string]int64{}
	for id, g := range s.grants {
		until["grant "+id] = RetainUntil(g.ExpiresAt)
	}
	for k, r := range s.idem {
		until["idem "+k.Worker+"/"+k.Key] = r.Until
	}
	for k, e := range s.ledger {
		until["ledger "+k] = e.Until
	}
	for k, u := range s.preauth {
		until["preauth "+k] = u.Until
	}
	for k, w := range s.quota {
		until["quota "+k] = w.Until
	}
	for k, r := range s.sources {
		until["source "+k] = r.until()
	}
	for k, r := range s.reviews {
		until["review "+k] = r.Until
	}
	for k, a := range s.approvals {
		until["approval "+k.Worker+"/"+k.Tool+"/"+k.Digest.String()] = a.ExpiresAt
	}
	for k, r := range s.replies {
		until["reply "+k.String()] = r.Until
	}
	for k, r := range s.routes {
		if r.End == endLive {
			until["route "+k] = r.Expires
		}
	}
	drop := func(at int64, name string) {
		if t, ok := until[name]; ok && t == at {
			delete(until, name)
			removed = append(removed, fmt.Sprintf("%d %s", at, name))
		}
	}
	// The heap and the in-order run, as one heap.
	h := append(slices.Clone(s.expiry), s.expiryRun.items[s.expiryRun.head:]...)
	h.init()
	for len(h) > 0 {
		it := h.pop()
		switch r := it.Ref.(type) {
		case *grants.Grant:
			drop(it.At, "grant "+r.ID)
			if r.IdemKey != "" {
				drop(it.At, "idem "+r.Worker+"/"+r.IdemKey)
			}
		case *permitRecords:
			g := &r.grant
			drop(it.At, "grant "+g.ID)
			drop(it.At, "idem "+g.Worker+"/"+g.IdemKey)
		case *idemID:
			drop(it.At, "idem "+r.Worker+"/"+r.Key)
		case *ledgerEntry:
			drop(it.At, "ledger "+r.Key)
		case *preauthUse:
			drop(it.At, "preauth "+r.ID)
		case *quotaWindow:
			drop(it.At, "quota "+r.Key)
		case *source:
			drop(it.At, "source "+r.ID)
		case *review:
			if s.reviews[r.ID] == r { // as prune: only the entry it was scheduled for
				drop(it.At, "review "+r.ID)
			}
		case *approval:
			if s.approvals[r.Key] == r {
				drop(it.At, "approval "+r.Key.Worker+"/"+r.Key.Tool+"/"+r.Key.Digest.String())
			}
		case *replySeen:
			if s.replies[r.Key] == r {
				drop(it.At, "reply "+r.Key.String())
			}
		case *routeItem:
			if cur := s.routes[r.Name]; cur != nil && cur.Gen == r.Gen { // as prune: only the lease it was scheduled for
				drop(it.At, "route "+r.Name)
			}
		default:
			panic(fmt.Sprintf("expiry item refers to %T", it.Ref))
		}
	}
	for name := range until {
		left = append(left, name)
	}
	sort.Strings(left)
	return removed, left
}

// SwapPolicy puts p in force in s without an epoch event and returns the
// policy it replaced, so that a test can show what the fold does not read.
func SwapPolicy(s *State, p *policy.Policy) *policy.Policy {
	old := s.policy
	s.policy = p
	return old
}
