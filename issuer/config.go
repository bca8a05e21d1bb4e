package issuer

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/natsauth"
)

// Config configures the service. Start from DefaultConfig.
type Config struct {
	// DevMode marks a single-node issuer running without NATS credentials;
	// status reports it so nobody mistakes it for a production cluster.
	DevMode bool
	// CommitTimeout bounds how long a request waits for its entry to be
	// committed before answering issuer_unavailable.
	CommitTimeout time.Duration
	// MaxInFlight bounds requests being processed at once.
	MaxInFlight int
	// StreamReplicas is the receipt stream's replication factor.
	StreamReplicas int
	// InitialPolicy is applied (epoch 1) when a leader finds no policy.
	InitialPolicy []byte
	// PublishBatch bounds receipts published per round.
	PublishBatch int
	// PublishLinger is how long a round of receipts smaller than
	// PublishBatch waits for company after the first of them could go (0:
	// it goes at once). Each receipt is still its own stream message;
	// rounds only share the stream's replication and fsync. Answers never
	// wait for publication, so the linger adds to the stream's lag, not to
	// a worker's latency.
	PublishLinger time.Duration
	// ConfirmEvery is how often the leader commits the published watermark.
	ConfirmEvery time.Duration
	Logger       *slog.Logger

	// NATSServer is the embedded NATS server, if any; status reads its
	// JetStream sync setting from it.
	NATSServer *server.Server
	// AdvertiseNATS is the client URL of the NATS server embedded in this
	// node, as clients reach it ("" when there is none, or it should not
	// be advertised). Status reports it and, while this node leads, its
	// answers to worker requests carry it in the api.HeaderLeaderNATS
	// header, so clients can enter at the leader's server and save the
	// route hop.
	AdvertiseNATS string

	// RaftTLS, NATSTLS and Auth describe how this node is secured; status
	// reports them.
	RaftTLS, NATSTLS, Auth bool

	// Credentials, when the embedded NATS servers run in operator mode,
	// signs the NATS user JWTs of spawned workers for the public keys
	// their parents named (each may publish only under
	// writ.api.<worker>.> and expires with the worker) and, while this
	// node leads, pushes the revocation of every recorded key whose
	// worker the state revoked, restored or respawned (credentials.go).
	// nil with static users or none: spawns then get no credential.
	Credentials *natsauth.Manager

	// Reviewers are the reviewer identities (NATS users that publish only
	// under writ.review.<name>.>) and the reviewer roles each holds: the
	// issuer accepts their decisions on the reviews whose role they hold
	// (and on reviews that name no role).
	Reviewers map[string][]string

	// ReceiptFormat caps the receipt format level this node reports and,
	// leading, proposes (see fsm.ReceiptFormat): 0 is its build's highest,
	// fsm.MaxReceiptFormat. A voter reporting 1 holds the whole cluster at
	// the legacy receipt form (for auditors that do not read the newer one
	// yet); it cannot lower a level the log has already raised.
	ReceiptFormat uint64
	// FormatCheckEvery is how often a leader whose receipt format level is
	// below what it offers asks the voters again (0: DefaultFormatCheck).
	FormatCheckEvery time.Duration

	// RefusalRate is how many refusals per second a worker may cause
	// before the leader stops proposing its requests and answers them
	// rate_limited, counted in one refusal summary per RefusalWindow (see
	// admission.go); 0 turns admission control off. RefusalBurst is how
	// many refusals in a row a worker may cause before the rate applies.
	RefusalRate  float64
	RefusalBurst int
	// RefusalWindow is how often the leader records the requests it
	// answered rate_limited, one summary per worker and request kind (0:
	// DefaultRefusalWindow).
	RefusalWindow time.Duration

	// StatusDigestShare bounds the time status spends computing the state
	// digest (an encoding and SHA-256 pass over the whole state: tens of
	// milliseconds at 50,000 live grants) to this share of the time: after
	// a digest took d, a status that needs a new one waits until
	// d*(1/share-1) have passed (at most MaxStatusDigestWait), so a status
	// poller slows down instead of taking the cores from the request path.
	// Every answer is still fresh: status waits, it never serves an old
	// digest for a changed state. 1 never waits (0: the default).
	StatusDigestShare float64
}

// DefaultStatusDigestShare lets the state digest of status requests take
// a quarter of one core at most; MaxStatusDigestWait is the longest a
// status waits for its turn.
const (
	DefaultStatusDigestShare = 0.25
	MaxStatusDigestWait      = time.Second
)

// Admission control defaults: 200 refusals a second per worker after a
// burst of 1000, counted once a second. A busy worker that races its own
// spends (one of two racing attempts is refused already_spent) or keeps
// retrying after a revocation stays well below this; a worker flooding
// refused requests costs at most this many receipts a second.
const (
	DefaultRefusalRate   = 200
	DefaultRefusalBurst  = 1000
	DefaultRefusalWindow = time.Second
)

// Receipt rounds: a partial round waits at most DefaultPublishLinger for
// company (see Config.PublishLinger); a linger above MaxPublishLinger is
// refused.
const (
	DefaultPublishLinger = 20 * time.Millisecond
	MaxPublishLinger     = time.Second
)

// DefaultFormatCheck is how often a leader retries raising the receipt
// format level while a voter does not write it yet.
const DefaultFormatCheck = 3 * time.Second

// DefaultConfig returns defaults for a single node.
func DefaultConfig() Config {
	return Config{
		CommitTimeout:  5 * time.Second,
		MaxInFlight:    8192,
		StreamReplicas: 1,
		PublishBatch:   1024,
		ConfirmEvery:   50 * time.Millisecond,
		PublishLinger:  DefaultPublishLinger,

		FormatCheckEvery: DefaultFormatCheck,

		RefusalRate:   DefaultRefusalRate,
		RefusalBurst:  DefaultRefusalBurst,
		RefusalWindow: DefaultRefusalWindow,

		StatusDigestShare: DefaultStatusDigestShare,
	}
}

// ErrConfig wraps every validation error; the message names the field.
var ErrConfig = errors.New("issuer: invalid config")

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.CommitTimeout <= 0:
		return fmt.Errorf("%w: CommitTimeout must be positive", ErrConfig)
	case c.MaxInFlight < 1:
		return fmt.Errorf("%w: MaxInFlight must be at least 1", ErrConfig)
	case c.StreamReplicas != 1 && c.StreamReplicas != 3 && c.StreamReplicas != 5:
		return fmt.Errorf("%w: StreamReplicas must be 1, 3 or 5, got %d", ErrConfig, c.StreamReplicas)
	case c.PublishBatch < 1:
		return fmt.Errorf("%w: PublishBatch must be at least 1", ErrConfig)
	case c.PublishLinger < 0 || c.PublishLinger > MaxPublishLinger:
		return fmt.Errorf("%w: PublishLinger must be between 0 and %s (use --publish-linger)", ErrConfig, MaxPublishLinger)
	case c.ConfirmEvery <= 0:
		return fmt.Errorf("%w: ConfirmEvery must be positive", ErrConfig)
	case c.ReceiptFormat > fsm.MaxReceiptFormat:
		return fmt.Errorf("%w: ReceiptFormat %d is above %d, the highest this build writes", ErrConfig, c.ReceiptFormat, fsm.MaxReceiptFormat)
	case c.StatusDigestShare < 0 || c.StatusDigestShare > 1 || math.IsNaN(c.StatusDigestShare):
		return fmt.Errorf("%w: StatusDigestShare must be between 0 and 1 (0: %g; --status-digest-share)", ErrConfig, DefaultStatusDigestShare)
	case c.FormatCheckEvery < 0:
		return fmt.Errorf("%w: FormatCheckEvery must not be negative", ErrConfig)
	case c.RefusalRate < 0 || math.IsNaN(c.RefusalRate):
		return fmt.Errorf("%w: RefusalRate must not be negative (0 turns admission control off)", ErrConfig)
	case c.RefusalRate > 0 && c.RefusalBurst < 1:
		return fmt.Errorf("%w: RefusalBurst must be at least 1 when RefusalRate is set", ErrConfig)
	case c.RefusalWindow < 0:
		return fmt.Errorf("%w: RefusalWindow must not be negative", ErrConfig)
	}
	if c.InitialPolicy != nil {
		if _, err := LogPolicy(c.InitialPolicy); err != nil {
			return fmt.Errorf("%w: InitialPolicy (--policy): %w", ErrConfig, err)
		}
	}
	return nil
}
