package api

// Fleets: spawned workers, checkpoint restores, respawns and lifts.
//
// A worker spawns a child on writ.api.<parent>.spawn (SpawnRequest): the
// issuer records the child with a scope that is a subset of the parent's
// (tools, consequence classes, targets, lifetime) or refuses with
// scope_widens naming the field that would widen. The answer is an
// envelope of kind "spawn" naming the child (Worker), its Parent, Lane,
// Incarnation and ExpiresAt: what a credential for the child is minted
// from. A worker that restored a checkpoint starts a new incarnation on
// writ.api.<worker>.restore (RestoreRequest): every grant of the old
// incarnation is refused at spend from then on. An operator respawns a
// revoked worker (SubjectRespawn) in a lane, approval-blocked, and lifts
// the block (SubjectLift); SubjectFleet lists the recorded workers.

// Worker operations of fleets.
const (
	// OpSpawn spawns a child worker (SpawnRequest).
	OpSpawn = "spawn"
	// OpRestore starts a new incarnation after a checkpoint restore
	// (RestoreRequest).
	OpRestore = "restore"
)

// Operator subjects of fleets.
const (
	// SubjectRespawn respawns a worker (RespawnRequest).
	SubjectRespawn = OperatorPrefix + "respawn"
	// SubjectLift lifts a respawned worker's approval block (LiftRequest).
	SubjectLift = OperatorPrefix + "lift"
	// SubjectFleet lists the spawned and respawned workers (FleetRequest,
	// answered with Fleet).
	SubjectFleet = OperatorPrefix + "fleet"
)

// Spawn bounds.
const (
	// MaxSpawnScope bounds each of a spawn's scope lists.
	MaxSpawnScope = 64
	// MaxSpawnTTLMillis bounds a child's lifetime (24h).
	MaxSpawnTTLMillis = 24 * 60 * 60 * 1000
	// MaxScopeEntryLen bounds one tool pattern, class or target pattern.
	MaxScopeEntryLen = 512
)

// SpawnRequest asks for a child worker. Child is the child's id, which
// starts with the parent's id and a dash (the client picks it, so that a
// retry names the same child); Lane its lane
// (never coordinator); ParentLane the lane the parent runs in (the child
// is judged under it too); Tools, Classes and Targets narrow the child's
// scope (empty: the parent's); TTLMillis its lifetime (0: an hour, never
// past the parent's).
type SpawnRequest struct {
	V          int      `json:"v"`
	Child      string   `json:"child"`
	Lane       string   `json:"lane"`
	ParentLane string   `json:"parent_lane,omitempty"`
	Tools      []string `json:"tools,omitempty"`
	Classes    []string `json:"classes,omitempty"`
	Targets    []string `json:"targets,omitempty"`
	TTLMillis  int64    `json:"ttl_ms,omitempty"`
	// UserKey is the public nkey (U...) of the child's NATS user, whose
	// seed the parent generated and keeps: an issuer in NATS operator mode
	// signs a user JWT for it (Envelope.UserJWT). The seed never travels.
	UserKey string `json:"user_key,omitempty"`
}

// RestoreRequest starts the caller's next incarnation.
type RestoreRequest struct {
	V int `json:"v"`
}

// RespawnRequest brings Worker back in Lane under a new incarnation,
// approval-blocked until an operator lifts the block; Note says why.
type RespawnRequest struct {
	V      int    `json:"v"`
	Worker string `json:"worker"`
	Lane   string `json:"lane"`
	Note   string `json:"note,omitempty"`
}

// LiftRequest lifts Worker's respawn block; Note says why.
type LiftRequest struct {
	V      int    `json:"v"`
	Worker string `json:"worker"`
	Note   string `json:"note,omitempty"`
}

// FleetRequest asks for the recorded workers.
type FleetRequest struct {
	V int `json:"v"`
}

// Fleet lists the spawned and respawned workers, by id.
type Fleet struct {
	Clock   int64         `json:"clock"`
	Workers []FleetWorker `json:"workers"`
	Error   string        `json:"error,omitempty"`
}

// FleetWorker is one recorded worker: its parent (none for a respawned
// root), lane, scope (absent lists: unrestricted), lifetime, incarnation,
// whether it is approval-blocked and whether it is revoked.
type FleetWorker struct {
	Worker      string   `json:"worker"`
	Parent      string   `json:"parent,omitempty"`
	Lane        string   `json:"lane"`
	Tools       []string `json:"tools,omitempty"`
	Classes     []string `json:"classes,omitempty"`
	Targets     []string `json:"targets,omitempty"`
	IssuedAt    int64    `json:"issued_at"`
	ExpiresAt   int64    `json:"expires_at,omitempty"`
	Incarnation uint64   `json:"incarnation"`
	Blocked     bool     `json:"blocked,omitempty"`
	Revoked     bool     `json:"revoked,omitempty"`
}
