package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// Subagents as spawned workers. A Claude Code subagent (a Task or Agent
// call of the main session) is judged as a spawn: its first call asks the
// issuer for a child of this worker in the subagent type's lane, judged
// also under the main session's lane (so a lane mapping can only narrow),
// and every call of the subagent is then made as that child. Every grant
// the child gets binds this worker's revocation counter: revoking this
// worker stops its subagents' next calls in the same log entry.
//
// The child's id is derived from this worker's id and the subagent's
// session and agent id, so every hook process of the subagent names the
// same child and the spawn is idempotent; a marker in the state directory
// saves the spawn round trip while the child lives. A cluster that does
// not record spawns yet (receipt format below 8) answers
// unsupported_version, and the subagent's calls are then made in this
// worker's name, as before fleets.

// SubagentTTL is the lifetime asked for a subagent's child worker (never
// past this worker's own).
const SubagentTTL = 8 * time.Hour

// subagentsAsWorkers reports whether subagents run as child workers.
func (c *workerConfig) subagentsAsWorkers() bool {
	return c.SubagentsAsWorkers == nil || *c.SubagentsAsWorkers
}

// SubagentChildID is the child worker id of a subagent of parent.
func SubagentChildID(parent, session, agentID string) string {
	sum := sha256.Sum256([]byte(session + "\x00" + agentID))
	return parent + "-sa-" + hex.EncodeToString(sum[:])[:10]
}

// errNoSpawns says the cluster does not record spawns yet.
var errNoSpawns = errors.New("the cluster does not record spawns yet")

// subagentChild makes sure the subagent's child worker exists and returns
// its id. It returns errNoSpawns when the cluster is below the fleet
// level, and a refusal envelope when the spawn was refused (the call is
// then blocked with it).
func (g *Agent) subagentChild(ctx context.Context, stateDir, session string, call harness.Call, mainLane, lane string) (string, *grants.Envelope, error) {
	child := SubagentChildID(g.Worker, session, call.AgentID)
	marker := filepath.Join(stateDir, "fleet", child)
	if b, err := os.ReadFile(marker); err == nil {
		if until, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && time.Now().UnixNano() < until &&
			(g.Conn.CredsFile == "" || fileExists(SubagentCredsPath(stateDir, child))) {
			return child, nil, nil
		}
	}
	// In operator mode the child gets a NATS user of its own, whose key
	// pair every hook process of the subagent shares through the state
	// directory (so that a retried spawn names the same key).
	var (
		seed    []byte
		userKey string
		err     error
	)
	if g.Conn.CredsFile != "" {
		if seed, userKey, err = subagentKey(stateDir, child); err != nil {
			return "", nil, err
		}
	}
	c, nc, err := g.dial(ctx, true)
	if err != nil {
		return "", nil, err
	}
	defer nc.Close()
	env, err := c.Spawn(ctx, api.SpawnRequest{Child: child, Lane: lane, ParentLane: mainLane, TTLMillis: SubagentTTL.Milliseconds(), UserKey: userKey})
	if err != nil {
		return "", nil, err
	}
	switch {
	case env.Decision == grants.Permit:
	case env.Reason == grants.ReasonUnknownVersion:
		return "", nil, errNoSpawns
	case env.Reason == grants.ReasonScopeWidens && env.Missing == "ttl":
		// This worker ends sooner than SubagentTTL: ask for what is left.
		env, err = c.Spawn(ctx, api.SpawnRequest{Child: child, Lane: lane, ParentLane: mainLane, UserKey: userKey})
		if err != nil {
			return "", nil, err
		}
		if env.Decision != grants.Permit {
			return "", &env, nil
		}
	default:
		env.Detail = strings.TrimSpace(fmt.Sprintf("subagent %s (%s) as child worker %s: %s", call.AgentID, call.AgentType, child, env.Detail))
		return "", &env, nil
	}
	if seed != nil {
		// Fail closed: without its own credential the subagent's calls
		// are blocked, never made with this worker's.
		b, err := ChildCreds(env, seed)
		if err == nil {
			err = writeFileAtomic(SubagentCredsPath(stateDir, child), b)
		}
		if err != nil {
			refusal := grants.Refuse(grants.ReasonIssuerUnavail, "child credential",
				fmt.Sprintf("subagent %s (%s) as child worker %s: %v", call.AgentID, call.AgentType, child, err))
			return "", &refusal, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err == nil {
		_ = os.WriteFile(marker, []byte(strconv.FormatInt(env.ExpiresAt, 10)+"\n"), 0o600)
	}
	return child, nil, nil
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
