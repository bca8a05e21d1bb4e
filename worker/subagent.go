package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// Subagents as spawned workers. A Claude Code subagent is judged as a
// spawn twice over: when the main session makes the Task (or Agent) call
// that would start it, and when the subagent makes its first call.
//
// At the Task call's PreToolUse the subagent does not exist yet and has no
// agent id, so the child's id is derived from this worker's id, the
// session and the Task call's tool_use_id (TaskChildID): every hook
// process for that call names the same child, and the spawn is
// idempotent. The spawn asks for the child in the subagent type's lane
// with the type's narrower scope (subagentSpec), judged also under the
// main session's lane; a refusal blocks the Task call with the issuer's
// answer (scope_widens naming the field), and a type without a lane is
// refused before anything is asked. The spawned child is then left in the
// state directory as pending for its type in this session.
//
// A subagent's hook events carry its agent id and type but not the
// tool_use_id of the Task call that started it, so the two sides meet in
// the state directory: the subagent's first call claims one pending child
// of its type in its session (an atomic rename: no two subagents claim
// the same child) and every later call of the subagent reads its claim.
// Siblings of one type started together may each claim the other's
// child; both children have the same lane and scope, so what either may
// do is the same. A subagent that finds no pending child (its Task call
// was judged in another state directory, or before this version) spawns
// one derived from its session and agent id (SubagentChildID), as
// before, under the same lane and scope checks.
//
// Every grant a child gets binds this worker's revocation counter:
// revoking this worker stops its subagents' next calls in the same log
// entry. A cluster that does not record spawns yet (receipt format below
// 8) answers unsupported_version, and the subagent's calls are then made
// in this worker's name, in its type's lane, as before fleets.

// SubagentTTL is the lifetime asked for a subagent's child worker by
// default (never past this worker's own); a type's "ttl" may shorten it.
const SubagentTTL = 8 * time.Hour

// Tool names of Claude Code's subagent call, and the field of its input
// that names the subagent type (general-purpose when absent).
const (
	ToolTask            = "Task"
	ToolAgent           = "Agent"
	subagentTypeField   = "subagent_type"
	DefaultSubagentType = "general-purpose"
)

// subagentsAsWorkers reports whether subagents run as child workers.
func (c *workerConfig) subagentsAsWorkers() bool {
	return c.SubagentsAsWorkers == nil || *c.SubagentsAsWorkers
}

// SubagentChildID is the child worker id of a subagent of parent that
// found no child spawned for it at its Task call.
func SubagentChildID(parent, session, agentID string) string {
	sum := sha256.Sum256([]byte(session + "\x00" + agentID))
	return parent + "-sa-" + hex.EncodeToString(sum[:])[:10]
}

// TaskChildID is the child worker id spawned at the Task call toolUseID
// of parent's session.
func TaskChildID(parent, session, toolUseID string) string {
	sum := sha256.Sum256([]byte("task\x00" + session + "\x00" + toolUseID))
	return parent + "-st-" + hex.EncodeToString(sum[:])[:10]
}

// IsSubagentCall reports whether a main-session call starts a subagent.
func IsSubagentCall(call harness.Call) bool {
	return call.AgentID == "" && (call.Tool == ToolTask || call.Tool == ToolAgent)
}

// subagentType reads the subagent type a Task or Agent call asks for.
func subagentType(call harness.Call) (string, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(call.Args, &in); err != nil {
		return "", fmt.Errorf("%s call: tool_input is not an object: %v", call.Tool, err)
	}
	raw, ok := in[subagentTypeField]
	if !ok || string(raw) == "null" {
		return DefaultSubagentType, nil
	}
	var typ string
	if err := json.Unmarshal(raw, &typ); err != nil || strings.TrimSpace(typ) == "" {
		return "", fmt.Errorf("%s call: %s is not a subagent type name", call.Tool, subagentTypeField)
	}
	return typ, nil
}

// errNoSpawns says the cluster does not record spawns yet.
var errNoSpawns = errors.New("the cluster does not record spawns yet")

// spawnChild asks the issuer for child as declared by sp, unless a live
// marker says it was spawned already. It returns errNoSpawns when the
// cluster is below the fleet level, and the refusal envelope when the
// spawn was refused. fresh says the child was spawned by this call.
func (g *Agent) spawnChild(ctx context.Context, stateDir, child, mainLane string, sp subagentSpec) (refusal *grants.Envelope, fresh bool, err error) {
	marker := filepath.Join(stateDir, "fleet", child)
	if liveMarker(marker) && (g.Conn.CredsFile == "" || fileExists(SubagentCredsPath(stateDir, child))) {
		return nil, false, nil
	}
	// In operator mode the child gets a NATS user of its own, whose key
	// pair every hook process of the subagent shares through the state
	// directory (so that a retried spawn names the same key).
	var (
		seed    []byte
		userKey string
	)
	if g.Conn.CredsFile != "" {
		if seed, userKey, err = subagentKey(stateDir, child); err != nil {
			return nil, false, err
		}
	}
	c, nc, err := g.dial(ctx, true)
	if err != nil {
		return nil, false, err
	}
	defer nc.Close()
	req := sp.spawnRequest(child, mainLane)
	req.UserKey = userKey
	env, err := c.Spawn(ctx, req)
	if err != nil {
		return nil, false, err
	}
	switch {
	case env.Decision == grants.Permit:
	case env.Reason == grants.ReasonUnknownVersion:
		return nil, false, errNoSpawns
	case env.Reason == grants.ReasonScopeWidens && env.Missing == "ttl" && sp.TTL == "":
		// This worker ends sooner than SubagentTTL: ask for what is
		// left. (A declared ttl is the declaration's: not shortened.)
		req.TTLMillis = 0
		env, err = c.Spawn(ctx, req)
		if err != nil {
			return nil, false, err
		}
		if env.Decision != grants.Permit {
			return &env, false, nil
		}
	default:
		return &env, false, nil
	}
	if seed != nil {
		// Fail closed: without its own credential the child's calls are
		// blocked, never made with this worker's.
		b, err := ChildCreds(env, seed)
		if err == nil {
			err = writeFileAtomic(SubagentCredsPath(stateDir, child), b)
		}
		if err != nil {
			refusal := grants.Refuse(grants.ReasonIssuerUnavail, "child credential",
				fmt.Sprintf("child worker %s has no NATS credential of its own: %v", child, err))
			return &refusal, false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err == nil {
		_ = os.WriteFile(marker, []byte(strconv.FormatInt(env.ExpiresAt, 10)+"\n"), 0o600)
	}
	return nil, true, nil
}

// liveMarker reports whether a spawn marker says its child still lives.
func liveMarker(marker string) bool {
	b, err := os.ReadFile(marker)
	if err != nil {
		return false
	}
	until, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return err == nil && time.Now().UnixNano() < until
}

// taskSpawn judges a main-session Task or Agent call as the spawn of the
// subagent it would start: a refusal blocks the call, an error fails it
// closed. Neither means the call goes on to be judged as any other call
// (the child was spawned, subagents are kept in this worker's name, or
// the cluster is below the fleet level).
func (g *Agent) taskSpawn(ctx context.Context, cfg *workerConfig, stateDir, session string, call harness.Call) (refusal *grants.Envelope, err error) {
	typ, err := subagentType(call)
	if err != nil {
		return nil, err
	}
	sp, err := cfg.subagent(typ)
	if err != nil {
		// Never run as the parent: a type without a lane does not start.
		return nil, fmt.Errorf("%s call for subagent type %q refused: %v", call.Tool, typ, err)
	}
	if !cfg.subagentsAsWorkers() {
		return nil, nil
	}
	mainLane, err := cfg.laneFor("")
	if err != nil {
		return nil, err
	}
	child := TaskChildID(g.Worker, session, call.CallID)
	refusal, fresh, err := g.spawnChild(ctx, stateDir, child, mainLane, sp)
	switch {
	case errors.Is(err, errNoSpawns):
		return nil, nil
	case err != nil:
		return nil, err
	case refusal != nil:
		refusal.Detail = strings.TrimSpace(fmt.Sprintf("%s call would start subagent type %s as child worker %s in lane %s: %s", call.Tool, typ, child, sp.Lane, refusal.Detail))
		return refusal, nil
	}
	if fresh {
		if err := addPending(stateDir, session, typ, child); err != nil {
			return nil, fmt.Errorf("recording child worker %s for the subagent: %v", child, err)
		}
	}
	return nil, nil
}

// subagentChild makes sure a subagent's child worker exists and returns
// its id: the child spawned at its Task call when it can claim one, else
// one spawned for it now. It returns errNoSpawns when the cluster is below
// the fleet level, and a refusal envelope when the spawn was refused (the
// call is then blocked with it).
func (g *Agent) subagentChild(ctx context.Context, stateDir, session string, call harness.Call, mainLane string, sp subagentSpec) (string, *grants.Envelope, error) {
	if child, ok := claimPending(ctx, stateDir, session, call.AgentType, call.AgentID); ok {
		return child, nil, nil
	}
	child := SubagentChildID(g.Worker, session, call.AgentID)
	refusal, _, err := g.spawnChild(ctx, stateDir, child, mainLane, sp)
	if err != nil {
		return "", nil, err
	}
	if refusal != nil {
		refusal.Detail = strings.TrimSpace(fmt.Sprintf("subagent %s (%s) as child worker %s: %s", call.AgentID, call.AgentType, child, refusal.Detail))
		return "", refusal, nil
	}
	return child, nil, nil
}

// The pending and claimed children in the state directory:
// fleet/task/<session, type>/<child> holds the child's expiry until a
// subagent claims it; fleet/agent/<session, agent> then holds
// "<child> <expiry>".

func hashName(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:24]
}

func pendingDir(stateDir, session, typ string) string {
	return filepath.Join(stateDir, "fleet", "task", hashName(session, typ))
}

func claimPath(stateDir, session, agentID string) string {
	return filepath.Join(stateDir, "fleet", "agent", hashName(session, agentID))
}

// addPending leaves child pending for the next subagent of typ.
func addPending(stateDir, session, typ, child string) error {
	b, err := os.ReadFile(filepath.Join(stateDir, "fleet", child))
	if err != nil {
		return err
	}
	dir := pendingDir(stateDir, session, typ)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+child+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, child))
}

// claimedChild returns the child a subagent claimed, if it did and the
// child still lives.
func claimedChild(stateDir, session, agentID string) (string, bool) {
	b, err := os.ReadFile(claimPath(stateDir, session, agentID))
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return "", false
	}
	until, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || time.Now().UnixNano() >= until {
		return "", false
	}
	return f[0], true
}

// claimPending returns the subagent's claimed child, claiming a pending
// one of its type first if it has none. The hook processes of every
// subagent of one type in a session take an exclusive lock on that type's
// pending directory for the whole check-and-claim, so two processes of
// one subagent end with the same claim, two subagents never claim the
// same child, and no child is ever held half-claimed where a third
// process would skip it. Without the lock (ctx ended) nothing is claimed.
func claimPending(ctx context.Context, stateDir, session, typ, agentID string) (string, bool) {
	if child, ok := claimedChild(stateDir, session, agentID); ok {
		return child, true
	}
	dir := pendingDir(stateDir, session, typ)
	if _, err := os.Stat(dir); err != nil {
		return "", false // nothing was ever left pending for this type
	}
	l, err := lockFile(ctx, filepath.Join(dir, ".lock"), true)
	if err != nil {
		return "", false
	}
	defer l.unlock()
	// Another process of this subagent may have claimed while this one
	// waited for the lock.
	if child, ok := claimedChild(stateDir, session, agentID); ok {
		return child, true
	}
	claim := claimPath(stateDir, session, agentID)
	// A claim that claimedChild did not take has ended: its child is
	// gone, and so is the subagent's authority through it.
	_ = os.Remove(claim)
	if err := os.MkdirAll(filepath.Dir(claim), 0o700); err != nil {
		return "", false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range ents {
		child := e.Name()
		if strings.HasPrefix(child, ".") {
			continue
		}
		// Out of pending first, then claimed: a crash in between loses
		// the child (the subagent then gets a new one), never hands it
		// to two subagents.
		taken := filepath.Join(dir, "."+child+".taken")
		if os.Rename(filepath.Join(dir, child), taken) != nil {
			continue
		}
		b, err := os.ReadFile(taken)
		until, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		_ = os.Remove(taken)
		if err != nil || perr != nil || time.Now().UnixNano() >= until {
			continue // ended: nobody can use it
		}
		tmp := claim + ".tmp"
		if err := os.WriteFile(tmp, []byte(child+" "+strconv.FormatInt(until, 10)+"\n"), 0o600); err != nil {
			_ = os.Remove(tmp)
			return "", false
		}
		if err := os.Rename(tmp, claim); err != nil {
			_ = os.Remove(tmp)
			return "", false
		}
		return child, true
	}
	return "", false
}

// actAsSubagent makes the rest of the hook act as the subagent's child
// worker: its id and, in operator mode, its own NATS credential (a child
// without one cannot connect, so its calls are blocked).
func (g *Agent) actAsSubagent(stateDir, child string) {
	g.Worker = child
	if g.Conn.CredsFile != "" {
		g.Conn.CredsFile = SubagentCredsPath(stateDir, child)
	}
}

// SubagentCredsPath is where, in operator mode, a subagent's child
// worker's .creds file is kept.
func SubagentCredsPath(stateDir, child string) string {
	return filepath.Join(stateDir, "fleet", child+".creds")
}

// subagentKey returns the subagent child's user key pair, generating it
// once: the seed file is created whole (a temporary file linked into
// place), so that concurrent hook processes all end up with the same key.
func subagentKey(stateDir, child string) ([]byte, string, error) {
	path := filepath.Join(stateDir, "fleet", child+".nk")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", err
	}
	if b, err := os.ReadFile(path); err == nil {
		return childKeyFromSeed(b)
	}
	seed, _, err := NewChildKey()
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nk-*")
	if err != nil {
		return nil, "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(seed); err != nil {
		tmp.Close()
		return nil, "", err
	}
	if err := tmp.Close(); err != nil {
		return nil, "", err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	return childKeyFromSeed(b)
}

// writeFileAtomic writes path (mode 0600) through a temporary file
// renamed into place.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
