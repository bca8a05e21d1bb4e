package issuer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/raft"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// formatAskTimeout bounds one voter's status answer when the leader asks
// which receipt format it writes.
const formatAskTimeout = 2 * time.Second

// receiptFormat is the highest receipt format level this node offers: its
// build's, or lower when Config.ReceiptFormat holds it there.
func (s *Service) receiptFormat() uint64 {
	if f := s.cfg.ReceiptFormat; f != 0 && f < fsm.MaxReceiptFormat {
		return f
	}
	return fsm.MaxReceiptFormat
}

// raiseFormatLoop runs while this node leads: at once and then every
// Config.FormatCheckEvery, while the state's receipt format level is below
// what this node offers, it asks every voter which level it writes and
// proposes the lowest of them when that is higher than the level in
// force. Replicas write receipts in the form of the level the log raised
// them to, so a voter of an older build must never see a level it does
// not write: a voter that does not answer, or answers without
// receipt_format (a build that predates levels), counts as level 1 and
// holds the cluster there. It returns once the level is this node's.
func (s *Service) raiseFormatLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.FormatCheckEvery)
	defer tick.Stop()
	for {
		if s.raiseFormat(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// raiseFormat is one round of raiseFormatLoop. It reports whether the
// level has reached what this node offers.
func (s *Service) raiseFormat(ctx context.Context) (done bool) {
	var level uint64
	s.node.View(func(st *fsm.State, _ uint64) { level = st.ReceiptFormat() })
	offer := s.receiptFormat()
	if level >= offer {
		return true
	}
	voters, err := s.voters()
	if err != nil {
		s.log.Warn("receipt format: reading the raft configuration", "err", err)
		return false
	}
	target := s.clusterFormat(ctx, voters)
	if target <= level {
		s.log.Debug("receipt format held: not every voter writes a higher level", "level", level, "offered", offer)
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	env, err := s.node.Propose(pctx, fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:" + s.node.ID(), Format: target})
	switch {
	case err != nil:
		if ctx.Err() == nil && !isLeaderErr(err) {
			s.log.Warn("receipt format: proposing the raise", "level", target, "err", err)
		}
		return false
	case env.Decision != grants.Permit:
		s.log.Warn("receipt format: raise refused", "level", target, "reason", env.Reason, "detail", env.Detail)
		return false
	}
	s.log.Info("raised the receipt format: every voter writes it", "from", level, "to", target, "voters", len(voters))
	return target >= offer
}

// voters are the ids of the raft configuration's voters.
func (s *Service) voters() ([]string, error) {
	f := s.node.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var ids []string
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			ids = append(ids, string(srv.ID))
		}
	}
	return ids, nil
}

// clusterFormat is the highest receipt format level every voter writes:
// the lowest level any of them reports (this node's own without asking),
// fsm.ReceiptFormatLegacy for a voter that does not answer in time or
// answers without receipt_format, and for an empty configuration.
func (s *Service) clusterFormat(ctx context.Context, voters []string) uint64 {
	if len(voters) == 0 {
		return fsm.ReceiptFormatLegacy
	}
	lowest := s.receiptFormat()
	for _, id := range voters {
		if id == s.node.ID() {
			continue
		}
		lowest = min(lowest, s.askFormat(ctx, id))
		if lowest <= fsm.ReceiptFormatLegacy {
			break
		}
	}
	return lowest
}

// askFormat asks one node's status (writ.op.status.<id>) for the highest
// receipt format level its build writes.
func (s *Service) askFormat(ctx context.Context, id string) uint64 {
	actx, cancel := context.WithTimeout(ctx, formatAskTimeout)
	defer cancel()
	msg, err := s.nc.RequestWithContext(actx, api.SubjectStatus+"."+id, []byte(`{"v":1}`))
	if err != nil {
		s.log.Debug("receipt format: a voter did not answer", "voter", id, "err", err)
		return fsm.ReceiptFormatLegacy
	}
	var st struct {
		ReceiptFormat uint64 `json:"receipt_format"`
	}
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.ReceiptFormat < fsm.ReceiptFormatLegacy {
		return fsm.ReceiptFormatLegacy
	}
	return st.ReceiptFormat
}
