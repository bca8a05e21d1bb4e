package natsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
)

// Receipt stream parameters.
const (
	// DuplicateWindow is how long the stream remembers message ids
	// (Nats-Msg-Id) to drop re-sent messages.
	DuplicateWindow = 2 * time.Minute
	// MaxReplicas is the largest replica count JetStream allows.
	MaxReplicas = 5
)

// StreamConfig is the receipt stream's configuration with the given replica
// count: file storage, subjects writ.evt.>, no deletes, purges or roll-ups,
// no message TTLs, no age or count limits, new messages refused rather
// than old ones dropped when a server limit is reached, and atomic batches
// allowed, so a publisher can append a round of receipts all or nothing.
func StreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        events.StreamName,
		Description: "writ receipts: append-only event log",
		Subjects:    []string{events.SubjectAll},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  DuplicateWindow,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowRollup: false,
		// Lets a publisher send a window of receipts as one atomic batch
		// (see Publisher.Publish); servers before 2.12 ignore it.
		AllowAtomicPublish: true,
	}
}

// EnsureStream creates the receipt stream, or updates an existing one to
// StreamConfig(replicas), and checks the result keeps the append-only
// guarantees. Several nodes may call it at once. While a JetStream cluster
// is still forming (no meta leader, too few peers) it retries until ctx ends.
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	if js == nil {
		return nil, ErrNilJetStream
	}
	if replicas < 1 || replicas > MaxReplicas {
		return nil, fieldErr("replicas", "must be in 1..%d, got %d", MaxReplicas, replicas)
	}
	cfg := StreamConfig(replicas)
	backoff, attempt := 50*time.Millisecond, time.Second
	for {
		// A request sent while the cluster has no meta leader may never be
		// answered, and creating a replicated stream waits for its leader
		// election: bound each attempt, growing the bound.
		actx, cancel := context.WithTimeout(ctx, attempt)
		st, err := js.CreateOrUpdateStream(actx, cfg)
		cancel()
		attempt = min(2*attempt, 4*time.Second)
		if err == nil {
			if err := checkStreamConfig(st.CachedInfo().Config, replicas); err != nil {
				return nil, err
			}
			return st, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("natsbus: ensure stream %s: %w (last attempt: %v)", events.StreamName, ctx.Err(), err)
		}
		if !transientStreamErr(err) {
			return nil, fmt.Errorf("natsbus: ensure stream %s: %w", events.StreamName, err)
		}
		if sleepErr := sleepCtx(ctx, backoff); sleepErr != nil {
			return nil, fmt.Errorf("natsbus: ensure stream %s: %w (last attempt: %v)", events.StreamName, sleepErr, err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// transientStreamErr reports errors worth retrying while a cluster forms or
// when another node created the stream concurrently.
func transientStreamErr(err error) bool {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case 10005, // no suitable peers for placement
		10008, // JetStream system temporarily unavailable
		10009, // cluster can not handle request
		10023, // insufficient resources (peers not known yet)
		jetstream.JSErrCodeStreamNameInUse:
		return true
	}
	return false
}

// checkStreamConfig verifies the settings the audit log depends on.
func checkStreamConfig(c jetstream.StreamConfig, replicas int) error {
	bad := func(field string, got any) error {
		return fmt.Errorf("%w: %s is %v", ErrStreamConfig, field, got)
	}
	switch {
	case !slices.Equal(c.Subjects, []string{events.SubjectAll}):
		return bad("Subjects", c.Subjects)
	case c.Storage != jetstream.FileStorage:
		return bad("Storage", c.Storage)
	case c.Replicas != replicas:
		return bad("Replicas", c.Replicas)
	case !c.DenyDelete:
		return bad("DenyDelete", c.DenyDelete)
	case !c.DenyPurge:
		return bad("DenyPurge", c.DenyPurge)
	case c.AllowRollup:
		return bad("AllowRollup", c.AllowRollup)
	case c.AllowMsgTTL:
		return bad("AllowMsgTTL", c.AllowMsgTTL)
	case c.Discard != jetstream.DiscardNew:
		return bad("Discard", c.Discard)
	case c.Retention != jetstream.LimitsPolicy:
		return bad("Retention", c.Retention)
	case c.MaxAge != 0:
		return bad("MaxAge", c.MaxAge)
	case c.MaxMsgsPerSubject > 0:
		return bad("MaxMsgsPerSubject", c.MaxMsgsPerSubject)
	case c.Duplicates != DuplicateWindow:
		return bad("Duplicates", c.Duplicates)
	case c.PersistMode != jetstream.DefaultPersistMode:
		return bad("PersistMode", c.PersistMode)
	}
	return nil
}
