package issuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/telemetry"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

// queueGroup keeps a request from being handled twice if two nodes both
// believe they lead for a moment; only one of them can commit anyway.
const queueGroup = "writ-issuer"

// Service is the issuer's NATS face on one node.
type Service struct {
	cfg  Config
	node *raftnode.Node
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *natsbus.Publisher
	log  *slog.Logger
	sem  chan struct{}
	// work hands a request to an idle worker goroutine (unbuffered: a
	// send succeeds only if one is waiting); idle counts those waiting,
	// and quit, closed when Run returns, ends them (see spawn).
	work chan request
	idle atomic.Int32
	quit chan struct{}
	// snapSlot holds the one snapshot answer being sent, if any.
	snapSlot chan struct{}
	// noReply counts API requests dropped for having no reply subject.
	noReply atomic.Uint64
	// adm is the admission control of the current leadership term (nil
	// when not leading or when Config.RefusalRate is 0).
	adm atomic.Pointer[admission]
	// leaderHdr is the header of answers sent while leading (nil when
	// Config.AdvertiseNATS is empty); it is only read once built.
	leaderHdr nats.Header
	// metrics is nil unless EnableMetrics was called.
	metrics atomic.Pointer[telemetry.Issuer]

	mu        sync.Mutex
	streamSeq uint64 // last receipt known to be in the stream

	// digestMu guards the state digest Status last computed and the
	// state version it was computed at (see Status).
	digestMu sync.Mutex
	digestAt uint64
	digest   string
	// digestNext is when a status may next compute a digest (see
	// Config.StatusDigestShare).
	digestNext time.Time
	pubState   // publication health, for status

	creds credentials // worker NATS credentials (operator mode)

	// resent answers an operator request sent again with its first
	// answer (resent.go).
	resent resentCache
}

// New prepares a service; Run starts it.
func New(cfg Config, node *raftnode.Node, nc *nats.Conn) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("issuer: jetstream: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if cfg.FormatCheckEvery == 0 {
		cfg.FormatCheckEvery = DefaultFormatCheck
	}
	if cfg.StatusDigestShare == 0 {
		cfg.StatusDigestShare = DefaultStatusDigestShare
	}
	if cfg.RefusalWindow == 0 {
		cfg.RefusalWindow = DefaultRefusalWindow
	}
	var hdr nats.Header
	if cfg.AdvertiseNATS != "" {
		hdr = nats.Header{api.HeaderLeaderNATS: []string{cfg.AdvertiseNATS}}
	}
	s := &Service{
		cfg: cfg, node: node, nc: nc, js: js, pub: natsbus.NewPublisher(js),
		log: lg.With("node", node.ID()), sem: make(chan struct{}, cfg.MaxInFlight),
		snapSlot: make(chan struct{}, 1), leaderHdr: hdr,
		work: make(chan request), quit: make(chan struct{}),
	}
	if cfg.Credentials != nil {
		// Revocations of spawned workers long ended leave the account
		// JWT with the next push.
		cfg.Credentials.SetPrune(s.pruneEnded)
	}
	return s, nil
}

// Run serves until ctx ends. It answers per-node status always and, while
// this node leads, the worker and operator API and receipt publication.
func (s *Service) Run(ctx context.Context) error {
	nodeSub, err := s.nc.Subscribe(api.SubjectStatus+"."+s.node.ID(), s.handleStatus)
	if err != nil {
		return fmt.Errorf("issuer: subscribing to node status: %w", err)
	}
	defer nodeSub.Unsubscribe()
	snapSub, err := s.nc.Subscribe(SubjectSnapshot+"."+s.node.ID(), s.handleSnapshot)
	if err != nil {
		return fmt.Errorf("issuer: subscribing to node snapshots: %w", err)
	}
	defer snapSub.Unsubscribe()
	defer close(s.quit) // idle workers end; busy ones end after their request

	var (
		leadCancel context.CancelFunc
		leadDone   chan struct{}
	)
	stopLeading := func() {
		if leadCancel != nil {
			leadCancel()
			<-leadDone
			leadCancel, leadDone = nil, nil
		}
	}
	defer stopLeading()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		leader := s.node.IsLeader()
		switch {
		case leader && leadCancel == nil:
			lctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			leadCancel, leadDone = cancel, done
			go func() {
				defer close(done)
				if err := s.lead(lctx); err != nil && lctx.Err() == nil {
					s.log.Error("leading stopped", "err", err)
				}
			}()
		case !leader && leadCancel != nil:
			s.log.Info("lost leadership; stopped serving")
			stopLeading()
		case leader && leadDone != nil:
			select {
			case <-leadDone: // lead() failed; try again on the next tick
				leadCancel()
				leadCancel, leadDone = nil, nil
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.node.LeaderCh():
		case <-tick.C:
			s.sweepLapses()
		}
	}
}

// lead runs while this node is the leader.
func (s *Service) lead(ctx context.Context) error {
	if err := s.node.Barrier(10 * time.Second); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := s.ensurePolicy(ctx); err != nil {
		return err
	}
	// A brand-new cluster creates the receipt stream before serving: an R3
	// stream can only be created while all three servers are up, so a
	// leader that answered first could, after losing a node, hold receipts
	// it can never publish. Once anything has been published the stream
	// exists, and the API is served even while JetStream is degraded:
	// receipts wait in the replicated outbox and publishLoop retries.
	var published uint64
	s.node.View(func(st *fsm.State, _ uint64) { published = st.Published() })
	if published == 0 {
		if _, err := natsbus.EnsureStream(ctx, s.js, s.cfg.StreamReplicas); err != nil {
			return fmt.Errorf("receipt stream: %w", err)
		}
	}
	// Admission control starts each leadership term with full buckets
	// (admission.go): its state is this leader's, never replicated.
	if s.cfg.RefusalRate > 0 {
		a := newAdmission(s.cfg.RefusalRate, s.cfg.RefusalBurst)
		s.adm.Store(a)
		actx, stopAdm := context.WithCancel(ctx)
		admDone := make(chan struct{})
		go func() {
			defer close(admDone)
			s.summaryLoop(actx, a)
		}()
		defer func() {
			stopAdm()
			<-admDone
			s.adm.Store(nil)
		}()
	}
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}()
	for subj, h := range map[string]nats.MsgHandler{
		api.WorkerWildcard:                 s.handleWorker,
		api.SubjectRevoke:                  s.handleOperator,
		api.SubjectReinstate:               s.handleOperator,
		api.SubjectPolicy:                  s.handleOperator,
		api.SubjectApprove:                 s.handleOperator,
		api.SubjectReviewDecide:            s.handleOperator,
		api.SubjectReviewReply:             s.handleOperator,
		api.ReviewerWildcard:               s.handleReviewer,
		api.SubjectBreakGlass:              s.handleOperator,
		api.SubjectRespawn:                 s.handleOperator,
		api.SubjectLift:                    s.handleOperator,
		api.SubjectFleet:                   s.handleFleet,
		api.SubjectStatus:                  s.handleStatus,
		api.OperatorPrefix + "policy.show": s.handlePolicyShow,
		api.SubjectReviews:                 s.handleReviews,
		api.SubjectPolicyTest:              s.handlePolicyTest,
		api.SubjectRoutes:                  s.handleRoutes,
	} {
		sub, err := s.nc.QueueSubscribe(subj, queueGroup, h)
		if err != nil {
			return fmt.Errorf("subscribing to %s: %w", subj, err)
		}
		subs = append(subs, sub)
	}
	// Name this node's NATS server to idle clients, now and periodically.
	if s.cfg.AdvertiseNATS != "" {
		actx, stopAnnounce := context.WithCancel(ctx)
		announceDone := make(chan struct{})
		go func() {
			defer close(announceDone)
			s.announceLoop(actx)
		}()
		defer func() {
			stopAnnounce()
			<-announceDone
		}()
	}
	// Raise the receipt format level, now and then periodically, once
	// every voter writes a higher one.
	fctx, stopFormat := context.WithCancel(ctx)
	formatDone := make(chan struct{})
	go func() {
		defer close(formatDone)
		s.raiseFormatLoop(fctx)
	}()
	defer func() {
		stopFormat()
		<-formatDone
	}()
	// Keep the NATS servers' user revocations in step with the state
	// (operator mode).
	rctx, stopRevocations := context.WithCancel(ctx)
	revDone := make(chan struct{})
	go func() {
		defer close(revDone)
		s.revocationLoop(rctx)
	}()
	defer func() {
		stopRevocations()
		<-revDone
	}()
	s.log.Info("leading: serving the API and publishing receipts")
	return s.publishLoop(ctx)
}

// AnnounceEvery is how often a leader publishes its LeaderAnnouncement.
const AnnounceEvery = 5 * time.Second

// announceLoop publishes this node's api.LeaderAnnouncement on
// api.SubjectLeader at once and every AnnounceEvery until ctx ends.
func (s *Service) announceLoop(ctx context.Context) {
	t := time.NewTicker(AnnounceEvery)
	defer t.Stop()
	for {
		if s.node.IsLeader() {
			b, _ := json.Marshal(api.LeaderAnnouncement{V: api.Version, Node: s.node.ID(),
				Term: s.node.Raft().CurrentTerm(), NATSURL: s.cfg.AdvertiseNATS})
			if err := s.nc.Publish(api.SubjectLeader, b); err != nil {
				s.log.Debug("announcing leadership", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ensurePolicy applies the initial policy the first time a leader finds
// none, so the trust root is always in the log, never implied by code. The
// document written carries writ's built-in rules (LogPolicy).
func (s *Service) ensurePolicy(ctx context.Context) error {
	var (
		epoch    uint64
		builtins bool
	)
	s.node.View(func(st *fsm.State, _ uint64) {
		epoch = st.Epoch()
		p, _ := st.Policy()
		builtins = policy.HasBuiltins(p)
	})
	if epoch > 0 {
		if !builtins {
			// A policy applied before writ had built-in rules (or a version
			// 1 one) keeps judging as it did; re-applying it adds them.
			s.log.Warn("the policy in force lacks writ's built-in rules, so an agent could run writ's operator commands; re-apply a version 2 policy document with issuer policy apply FILE to add them", "epoch", epoch)
		}
		return nil
	}
	var p *policy.Policy
	var err error
	switch def := policy.Default(); {
	case s.cfg.InitialPolicy != nil:
		p, err = LogPolicy(s.cfg.InitialPolicy)
	case def.Version == policy.LegacyVersion:
		// A version 1 built-in default cannot carry the built-in rules;
		// it is applied as it is, and an operator moves to version 2 with
		// `issuer policy apply`, which adds them.
		p = def
		s.log.Warn("the built-in default policy is version 1 and has no built-in rules; apply a version 2 policy (issuer policy show --recommended) so agents cannot run writ's operator commands")
	default:
		p, err = policy.WithBuiltins(def)
	}
	if err != nil {
		return fmt.Errorf("initial policy: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	env, err := s.node.Propose(pctx, fsm.Command{Op: fsm.OpSetPolicy, Caller: "issuer:" + s.node.ID(), Policy: p.Canonical()})
	if err != nil {
		return fmt.Errorf("applying initial policy: %w", err)
	}
	if env.Decision != grants.Permit {
		return fmt.Errorf("initial policy refused: %s %s", env.Reason, env.Detail)
	}
	s.log.Info("applied initial policy", "epoch", env.Epoch, "digest", p.Digest().Short())
	return nil
}

// handler names what spawn runs for a request.
type handler uint8

const (
	workerHandler     handler = iota // worker
	operatorHandler                  // operator
	policyShowHandler                // policyShow
	reviewsHandler                   // reviews
	policyTestHandler                // policyTest
	reviewerHandler                  // reviewer
	routesHandler                    // routes
	fleetHandler                     // fleet
)

// inFlightLimit is the detail of a request refused at the in-flight limit.
const inFlightLimit = "issuer is at its in-flight limit: " + grants.KeptUndecided + "; " + grants.KeptRetrySame

// maxIdleWorkers is how many request goroutines, their request answered,
// wait for the next one rather than end. A request goroutine's stack
// grows to some tens of KiB on the commit path (fsm.Command and
// grants.Envelope are passed by value down it); a goroutine that ends
// gives that stack back and a new one grows its own again, copying it
// at every doubling. Keeping a few hundred alive, enough for the
// concurrency that batches well into one raft entry, saves those copies.
const maxIdleWorkers = 256

// request is a request handed to a worker goroutine.
type request struct {
	m *nats.Msg
	h handler
}

// spawn runs the handler h for m on a goroutine of its own, bounded by
// MaxInFlight, so that concurrent requests can share one raft entry: an
// idle worker goroutine if one is waiting, else a new one. When the bound
// is reached the request is answered issuer_unavailable at once (the
// client retries). Handing a request to an idle worker never waits, so
// a request is never queued behind another.
//
// A request without a reply subject is dropped before anything reads its
// body: nobody can receive its answer, and a flood of them must cost no
// more than counting them (DroppedNoReply).
func (s *Service) spawn(m *nats.Msg, h handler) {
	if m.Reply == "" {
		s.noReply.Add(1)
		return
	}
	select {
	case s.sem <- struct{}{}:
		select {
		case s.work <- request{m, h}:
		default:
			go s.workLoop(m, h)
		}
	default:
		s.respond(m, grants.Refuse(grants.ReasonIssuerUnavail, "capacity", inFlightLimit))
	}
}

// workLoop serves m with h, then waits for further requests from spawn
// while fewer than maxIdleWorkers others wait, until Run returns.
func (s *Service) workLoop(m *nats.Msg, h handler) {
	for {
		s.serve(m, h)
		if s.idle.Add(1) > maxIdleWorkers {
			s.idle.Add(-1)
			return
		}
		select {
		case r := <-s.work:
			s.idle.Add(-1)
			m, h = r.m, r.h
		case <-s.quit:
			s.idle.Add(-1)
			return
		}
	}
}

// serve runs the handler h for m and frees the slot spawn took.
func (s *Service) serve(m *nats.Msg, h handler) {
	defer func() { <-s.sem }()
	switch h {
	case workerHandler:
		s.worker(m)
	case operatorHandler:
		s.operator(m)
	case policyShowHandler:
		s.policyShow(m)
	case reviewsHandler:
		s.reviews(m)
	case policyTestHandler:
		s.policyTest(m)
	case reviewerHandler:
		s.reviewer(m)
	case routesHandler:
		s.routes(m)
	case fleetHandler:
		s.fleet(m)
	}
}

func (s *Service) handleWorker(m *nats.Msg) { s.spawn(m, workerHandler) }

func (s *Service) handleOperator(m *nats.Msg) { s.spawn(m, operatorHandler) }

func (s *Service) worker(m *nats.Msg) {
	mt := s.metrics.Load()
	var start time.Time
	if mt != nil {
		start = time.Now()
	}
	worker, op, err := api.ParseWorkerSubject(m.Subject)
	if err != nil {
		env := grants.Refuse(grants.ReasonInvalidRequest, "subject", err.Error())
		s.respond(m, env)
		s.observe("", &env, "", 0)
		return
	}
	if op == api.OpSpend && mt != nil {
		defer func() { mt.Spend(time.Since(start)) }()
	}
	var (
		cmd  fsm.Command
		rerr *requestError
		// split: a combined request below receipt format 11, proposed
		// as its two commands in turn (proposeSplit).
		split bool
	)
	switch op {
	case api.OpGrant:
		cmd, rerr = grantCommand(worker, m.Data)
		if rerr == nil && len(cmd.Traces) > 0 {
			// A worker may trace more than the level in force accepts
			// (typed matches, nested decodings, result fields): say less
			// rather than have the request refused.
			var level uint64
			s.node.View(func(st *fsm.State, _ uint64) { level = st.ReceiptFormat() })
			if level < fsm.ReceiptFormatResultFields {
				stripResultFields(cmd.Traces)
			}
			fsm.DowngradeTraces(cmd.Traces, level)
		}
	case api.OpSpend:
		var canon []byte
		cmd, canon, rerr = spendCommand(worker, m.Data)
		if rerr == nil && canon != nil {
			var tool, target string
			s.node.View(func(st *fsm.State, _ uint64) {
				if g, ok := st.Grant(cmd.GrantID); ok {
					tool, target = g.Tool, g.Target
				}
			})
			bindSpend(&cmd, canon, tool, target)
		}
	case api.OpGrantSpend:
		// A grant request spent at once (receipt format 11): decoded and
		// checked as a grant request.
		cmd, rerr = grantCommand(worker, m.Data)
		if rerr == nil {
			level := s.receiptLevel()
			if len(cmd.Traces) > 0 {
				if level < fsm.ReceiptFormatResultFields {
					stripResultFields(cmd.Traces)
				}
				fsm.DowngradeTraces(cmd.Traces, level)
			}
			cmd.Op = fsm.OpGrantSpend
			split = level < fsm.ReceiptFormatGrantSpend
		}
	case api.OpEffectSource:
		cmd, rerr = effectSourceCommand(worker, m.Data)
		split = rerr == nil && s.receiptLevel() < fsm.ReceiptFormatGrantSpend
	case api.OpEffect:
		cmd, rerr = effectCommand(worker, m.Data)
	case api.OpSource:
		cmd, rerr = sourceCommand(worker, m.Data)
	case api.OpReview:
		cmd, rerr = reviewOpenCommand(worker, m.Data)
	case api.OpSpawn:
		cmd, rerr = spawnCommand(worker, m.Data)
		if rerr == nil {
			if env, widens := s.spawnLaneWidens(&cmd); widens {
				s.respond(m, env)
				s.observe(op, &env, cmd.Lane, 0)
				return
			}
		}
	case api.OpRestore:
		cmd, rerr = restoreCommand(worker, m.Data)
	case api.OpRoute:
		var status bool
		cmd, status, rerr = routeCommand(worker, m.Data)
		if rerr == nil && status {
			s.respond(m, s.routeStatus(cmd.Route))
			return
		}
	}
	if rerr != nil {
		env := rerr.envelope()
		s.respond(m, env)
		s.observe(op, &env, "", 0)
		return
	}
	a := s.adm.Load()
	if a != nil && !a.admit(worker, op, time.Now()) {
		env := throttled()
		s.respond(m, env)
		s.observe(op, &env, cmd.Lane, 0)
		return
	}
	proposed := s.clock()
	var env grants.Envelope
	if split {
		env = s.proposeSplit(cmd)
		s.respond(m, env)
	} else if op == api.OpSpawn {
		env = s.proposeSpawn(m, cmd)
	} else {
		env = s.propose(m, cmd)
	}
	s.observe(op, &env, cmd.Lane, s.since(proposed))
	if a != nil && env.Decision == grants.Deny && env.Seq != 0 {
		a.refused(worker, time.Now())
	}
}

// proposeSplit answers a combined request (api.OpGrantSpend,
// api.OpEffectSource) while the cluster is below receipt format 11, where
// the state machine does not take it: its two commands are proposed in
// turn, each its own log entry, and the answer is the one the combined
// op would give. A grant request is spent only when permitted (the spend
// of the grant the answer names, as a worker would send it); an effect's
// source is registered whatever the effect's answer. A first command not
// confirmed committed is the answer (issuer_unavailable): the worker
// retries the whole request under the same idempotency key, which
// replays what was committed.
func (s *Service) proposeSplit(cmd fsm.Command) grants.Envelope {
	first, second := fsm.SplitCombined(cmd)
	env, err := s.proposeCommand(first)
	if err != nil {
		return *err
	}
	if cmd.Op == fsm.OpGrantSpend {
		if env.Decision != grants.Permit || env.GrantID == "" {
			return env
		}
		second.GrantID = env.GrantID
		if env.Target == "" {
			// As bindSpend: the arguments are read for the drift check
			// of a grant that binds a target, and only then.
			second.Args = args.Flat{}
		}
		senv, err := s.proposeCommand(second)
		if err != nil {
			return *err
		}
		if senv.Decision == grants.Permit && senv.Target == "" {
			senv.Target = env.Target
		}
		return senv
	}
	senv, serr := s.proposeCommand(second)
	if serr != nil {
		senv = *serr
	}
	env.Source = &senv
	return env
}

// proposeCommand commits cmd and returns the state machine's answer, or
// the issuer_unavailable answer propose would send.
func (s *Service) proposeCommand(cmd fsm.Command) (grants.Envelope, *grants.Envelope) {
	env, err := s.node.ProposeWithin(s.cfg.CommitTimeout, cmd)
	if err != nil {
		detail := "the entry was not confirmed committed: " + grants.KeptUnconfirmed
		if errors.Is(err, raftnode.ErrNotLeader) {
			detail = "this node is no longer the leader: " + grants.KeptUnconfirmed
		}
		refusal := grants.Refuse(grants.ReasonIssuerUnavail, "commit", detail)
		return refusal, &refusal
	}
	return env, nil
}

// receiptLevel is the receipt format level this node has applied.
func (s *Service) receiptLevel() uint64 {
	var level uint64
	s.node.View(func(st *fsm.State, _ uint64) { level = st.ReceiptFormat() })
	return level
}

// bindSpend completes a spend that carried its arguments with the tool and
// target of the grant as this leader has applied it ("" and "" for a grant
// it does not know). The request digest is computed with the grant's tool
// (an unknown grant's matches nothing, and the state machine answers
// unknown_grant). The flattened arguments stay in the command only when
// the grant binds a target: the state machine reads a spend's arguments
// for the target-drift check alone, which it skips for a grant without a
// target and for a digest that does not match, and a grant's target never
// changes once minted. Dropping them leaves every decision and receipt the
// same and keeps the call's arguments, usually most of a spend's bytes,
// out of the raft log.
func bindSpend(cmd *fsm.Command, canonArgs []byte, tool, target string) {
	cmd.Digest = args.RequestDigest(tool, canonArgs)
	if target == "" {
		cmd.Args = args.Flat{}
	}
}

func (s *Service) operator(m *nats.Msg) {
	// Who the operator is comes from the NATS user the server
	// authenticated, not from the body; without auth it is "operator".
	who := "operator"
	var (
		cmd  fsm.Command
		rerr *requestError
	)
	switch m.Subject {
	case api.SubjectRevoke:
		cmd, rerr = revokeCommand(who, m.Data)
	case api.SubjectReinstate:
		cmd, rerr = reinstateCommand(who, m.Data)
	case api.SubjectPolicy:
		cmd, rerr = policyCommand(who, m.Data)
	case api.SubjectApprove:
		cmd, rerr = approveCommand(who, m.Data)
	case api.SubjectReviewDecide:
		cmd, rerr = reviewDecideCommand(who, nil, m.Data)
	case api.SubjectReviewReply:
		cmd, rerr = reviewReplyCommand(who, nil, m.Data)
	case api.SubjectBreakGlass:
		cmd, rerr = breakGlassCommand(who, m.Data)
	case api.SubjectRespawn:
		cmd, rerr = respawnCommand(who, m.Data)
	case api.SubjectLift:
		cmd, rerr = liftCommand(who, m.Data)
	default:
		rerr = invalid("subject", "unknown operator subject %q", m.Subject)
	}
	op := operatorOp(m.Subject)
	if rerr != nil {
		env := rerr.envelope()
		s.respond(m, env)
		s.observe(op, &env, "", 0)
		return
	}
	proposed := s.clock()
	env := s.answerOperator(m, cmd)
	s.observe(op, &env, "", s.since(proposed))
}

// operatorOp names an operator subject for metrics.
func operatorOp(subject string) string {
	switch subject {
	case api.SubjectRevoke:
		return telemetry.OpRevoke
	case api.SubjectReinstate:
		return telemetry.OpReinstate
	case api.SubjectPolicy:
		return telemetry.OpPolicy
	case api.SubjectApprove:
		return telemetry.OpApprove
	case api.SubjectBreakGlass:
		return telemetry.OpBreakGlass
	case api.SubjectRespawn:
		return telemetry.OpRespawn
	case api.SubjectLift:
		return telemetry.OpLift
	}
	return ""
}

// propose commits cmd and answers m with the state machine's answer, or
// issuer_unavailable when the entry is not confirmed committed within
// CommitTimeout. ProposeWithin keeps that deadline without a context per
// request. It returns the answer sent.
func (s *Service) propose(m *nats.Msg, cmd fsm.Command) grants.Envelope {
	env, _ := s.proposeCommand(cmd)
	s.respond(m, env)
	return env
}

func (s *Service) respond(m *nats.Msg, env grants.Envelope) {
	if m.Reply == "" {
		return
	}
	// The same bytes as json.Marshal(env), without reflection; encoding an
	// envelope cannot fail. NATS copies the payload before Respond
	// returns, so the buffer can live on the stack.
	var buf [1024]byte
	data := env.AppendJSON(buf[:0])
	var err error
	if s.leaderHdr != nil && s.node.IsLeader() {
		// Only a leader names itself: an answer sent after losing
		// leadership would point clients at a follower.
		err = s.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Data: data, Header: s.leaderHdr})
	} else {
		err = m.Respond(data)
	}
	if err != nil {
		s.log.Warn("answering request", "subject", m.Subject, "err", err)
	}
}

// Status builds this node's status.
func (s *Service) Status() api.Status {
	r := s.node.Raft()
	st := api.Status{Node: s.node.ID(), State: r.State().String(), DevMode: s.cfg.DevMode}
	addr, id := r.LeaderWithID()
	st.Leader = string(id)
	_ = addr
	stats := r.Stats()
	fmt.Sscan(stats["term"], &st.Term)
	fmt.Sscan(stats["commit_index"], &st.CommitIndex)
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			st.Peers = append(st.Peers, api.Peer{
				ID: string(srv.ID), Address: string(srv.Address),
				Suffrage: srv.Suffrage.String(), Leader: srv.ID == id,
			})
		}
	}
	// raft's own applied index: it also moves on snapshot restore and on
	// configuration entries, which the state machine never sees.
	st.AppliedIndex = r.AppliedIndex()
	// The state digest encodes and hashes the whole state (about 10 ms at
	// 20,000 grants); under the state machine's read lock that would stall
	// apply for as long. Under the lock the state is only frozen, and only
	// when the state changed since the last status (an applied entry or a
	// restored snapshot); the digest is computed from the frozen view
	// after the lock is released. FreezeDigest captures only the grants,
	// records and routes that changed since the previous status, and the
	// digest re-encodes only those (digestMu keeps two statuses from using
	// the state's digest mirror at once); paceDigest bounds the share of
	// time spent digesting.
	var (
		frozen  fsm.DigestView
		fresh   bool
		version uint64
	)
	s.digestMu.Lock()
	defer s.digestMu.Unlock()
	s.paceDigest()
	s.node.ViewVersion(func(fs *fsm.State, v uint64) {
		version = v
		if v != s.digestAt || s.digest == "" {
			frozen, fresh = fs.FreezeDigest(), true
		}
		x := fs.Stats()
		_, pd := fs.Policy()
		st.Clock, st.Epoch, st.PolicyDigest = x.Clock, x.Epoch, pd.String()
		st.Grants, st.Permitted, st.Spent, st.Closed, st.Revoked = x.Grants, x.Permitted, x.Spent, x.Closed, x.Revoked
		st.Idempotency, st.Counters, st.BarredWorkers = x.Idem, x.Counters, x.Barred
		st.Seq, st.Head, st.Published, st.Outbox = x.Seq, x.Head, x.Published, x.Outbox
		st.Sources, st.OpenReviews, st.Approvals = x.Sources, x.Reviews, x.Approvals
		st.Routes, st.LiveLeases = x.Routes, x.Leases
		st.ReceiptFormatLevel = fs.ReceiptFormat()
	})
	if fresh {
		start := time.Now()
		s.digest, s.digestAt = frozen.Digest().String(), version
		if share := s.cfg.StatusDigestShare; share < 1 { // New made 0 the default
			wait := time.Duration(float64(time.Since(start)) * (1/share - 1))
			s.digestNext = time.Now().Add(min(wait, MaxStatusDigestWait))
		}
	}
	st.StateDigest = s.digest
	st.ReceiptFormat = s.receiptFormat()
	s.mu.Lock()
	st.StreamLastSeq = s.streamSeq
	st.PublishRounds = s.rounds
	s.mu.Unlock()
	s.extendStatus(&st)
	return st
}

// paceDigest waits, with digestMu held, until a status may compute a new
// digest, when the state changed since the last one (see
// Config.StatusDigestShare).
func (s *Service) paceDigest() {
	wait := time.Until(s.digestNext)
	if wait <= 0 {
		return
	}
	var v uint64
	s.node.ViewVersion(func(_ *fsm.State, version uint64) { v = version })
	if v != s.digestAt {
		time.Sleep(wait)
	}
}

// DroppedNoReply is how many API requests this node dropped, unread, for
// having no reply subject.
func (s *Service) DroppedNoReply() uint64 { return s.noReply.Load() }

func (s *Service) handleStatus(m *nats.Msg) {
	if m.Reply == "" {
		s.noReply.Add(1)
		return
	}
	data, _ := json.Marshal(s.Status())
	_ = m.Respond(data)
}

// isLeaderErr reports whether err means "not the leader any more".
func isLeaderErr(err error) bool {
	return errors.Is(err, raftnode.ErrNotLeader) || errors.Is(err, raft.ErrNotLeader)
}
