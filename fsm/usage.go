package fsm

import (
	"github.com/writ-dev/writ/events"
)

// ledgerEntry is one effect-ledger key: how many boundary-crossing permits
// it had inside the window, and when it is forgotten (the last permit's
// time plus the ledger window).
type ledgerEntry struct {
	Key   string
	Count uint64
	Until int64
}

// preauthUse is what a preauthorization has been charged: uses and
// cumulative amount. It is kept until the preauthorization expires, across
// policy epochs, so re-applying a document cannot refill an instrument
// under the same id.
type preauthUse struct {
	ID     string
	Uses   uint64
	Amount uint64
	Until  int64
}

// quotaWindow is one quota's fixed window for one worker or lane.
type quotaWindow struct {
	Key      string
	Start    int64
	Requests uint64
	Amount   uint64
	Bytes    uint64
	Until    int64
}

// LedgerCount is policy.Usage: permits of a boundary-crossing effect with
// this key still inside the ledger window at now.
func (s *State) LedgerCount(key string, now int64) uint64 {
	if e, ok := s.ledger[key]; ok && now < e.Until {
		return e.Count
	}
	return 0
}

// PreauthUsed is policy.Usage: the uses and amount a preauthorization has
// been charged, as long as the record lives at now.
func (s *State) PreauthUsed(id string, now int64) (uses, amount uint64) {
	if u, ok := s.preauth[id]; ok && now < u.Until {
		return u.Uses, u.Amount
	}
	return 0, 0
}

// QuotaUsed is policy.Usage: what the quota window starting at start holds
// at now.
func (s *State) QuotaUsed(key string, start, now int64) (requests, amount, bytes uint64) {
	if w, ok := s.quota[key]; ok && w.Start == start && now < w.Until {
		return w.Requests, w.Amount, w.Bytes
	}
	return 0, 0, 0
}

// addSatU is a+b saturated at the top of uint64.
func addSatU(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

// usageFacts are what folding a permit's consumption needs beyond the
// permit itself: when its effect-ledger entry is forgotten, when the
// consumption record of its preauthorization may be, and the quota
// windows it counts against.
type usageFacts struct {
	ledgerUntil     int64
	instrumentUntil int64
	quotas          []events.QuotaWindow
}

// factsOf asks the policy in force for a permit's usage facts. The policy
// must not be nil.
func (s *State) factsOf(e *events.Event) usageFacts {
	var f usageFacts
	if e.LedgerKey != "" {
		f.ledgerUntil = AddSat(e.Time, s.policy.LedgerWindow())
	}
	if e.Instrument != "" {
		until, ok := s.policy.PreauthExpires(e.Instrument)
		if !ok {
			until = AddSat(e.ExpiresAt, RetainMargin)
		}
		f.instrumentUntil = until
	}
	for _, q := range s.policy.QuotaCharges(e.Worker, e.Lane, e.Time) {
		f.quotas = append(f.quotas, events.QuotaWindow{Key: q.Key, Start: q.Start, Until: AddSat(q.Start, q.Window)})
	}
	return f
}

// recordUsage writes a permit's usage facts on the permit Decide is about
// to record, as the policy in force (the one it is decided under) gives
// them. Charged marks the permit as carrying them, so that Evolve (and so
// replay and the auditor) reads them from the event and asks no policy.
//
// Only at ReceiptFormatFacts and above: at the legacy level the permit is
// written as every earlier build wrote it, without the facts, and its fold
// takes them from the policy in force (charge), to the same state.
func (s *State) recordUsage(e *events.Event) {
	if !s.writesFacts() {
		return
	}
	f := s.factsOf(e)
	e.Charged = true
	e.LedgerUntil, e.InstrumentUntil, e.Quotas = f.ledgerUntil, f.instrumentUntil, f.quotas
}

// charge records what a permit consumed: its effect-ledger key, the
// preauthorization it used and the quota windows it counts against. It is
// bookkeeping: the permit event names the key, the instrument, the amount
// and the bytes, and (Charged) when each record ends.
func (s *State) charge(e *events.Event) {
	var f usageFacts
	switch {
	case e.Charged:
		f = usageFacts{ledgerUntil: e.LedgerUntil, instrumentUntil: e.InstrumentUntil, quotas: e.Quotas}
	case s.policy != nil:
		// A permit written before the facts were recorded: the policy in
		// force is the one it was decided under (an epoch event is the
		// only thing that replaces it, and Decide's permits are folded at
		// once), so it gives the facts Decide would now record. This is
		// the only place the fold consults a policy, and only for such
		// permits; old streams fold exactly as they always did.
		f = s.factsOf(e)
	default:
		return
	}
	if e.LedgerKey != "" {
		le := s.ledger[e.LedgerKey]
		if le == nil {
			le = &ledgerEntry{Key: e.LedgerKey}
			s.ledger[e.LedgerKey] = le
		}
		le.Count = addSatU(le.Count, 1)
		le.Until = f.ledgerUntil
		s.schedule(le.Until, 0, expireLedger, le)
	}
	if e.Instrument != "" {
		until := f.instrumentUntil
		pu := s.preauth[e.Instrument]
		if pu == nil {
			pu = &preauthUse{ID: e.Instrument}
			s.preauth[e.Instrument] = pu
		}
		pu.Uses = addSatU(pu.Uses, 1)
		pu.Amount = addSatU(pu.Amount, e.Amount)
		if until > pu.Until {
			pu.Until = until
			s.schedule(pu.Until, 0, expirePreauth, pu)
		}
	}
	for _, q := range f.quotas {
		w := s.quota[q.Key]
		if w == nil || w.Start != q.Start {
			w = &quotaWindow{Key: q.Key, Start: q.Start, Until: q.Until}
			s.quota[q.Key] = w
			s.schedule(w.Until, 0, expireQuota, w)
		}
		w.Requests = addSatU(w.Requests, 1)
		w.Amount = addSatU(w.Amount, e.Amount)
		w.Bytes = addSatU(w.Bytes, e.Bytes)
	}
}

// pruneUsage drops the usage record an expiry item names, if the record
// under that key still ends at the item's time (a later permit may have
// extended it).
func (s *State) pruneUsage(it expiryItem) {
	switch r := it.Ref.(type) {
	case *ledgerEntry:
		if e, ok := s.ledger[r.Key]; ok && e.Until == it.At {
			delete(s.ledger, r.Key)
		}
	case *preauthUse:
		if u, ok := s.preauth[r.ID]; ok && u.Until == it.At {
			delete(s.preauth, r.ID)
		}
	case *quotaWindow:
		if w, ok := s.quota[r.Key]; ok && w.Until == it.At {
			delete(s.quota, r.Key)
		}
	}
}
