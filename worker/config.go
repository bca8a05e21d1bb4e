package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/internal/hookwire"
	"github.com/writ-dev/writ/provenance"
)

// Environment variables of the harness adapters.
const (
	// EnvConfig names the worker config file when --config is not given.
	EnvConfig = "WRIT_WORKER_CONFIG"
	// EnvStateDir supplies --state-dir.
	EnvStateDir = "WRIT_STATE_DIR"
	// EnvSpawned and EnvSpawnedLane are set by 'worker-agent spawn' for
	// the command it runs: the child's id and lane. They beat the config
	// file (which names the parent), so that nothing inside a spawned
	// child acts as its parent; a --worker naming anyone else is refused.
	EnvSpawned     = "WRIT_SPAWNED_WORKER"
	EnvSpawnedLane = "WRIT_SPAWNED_LANE"
)

// StateDir is the state directory used when --state-dir is not given:
// $WRIT_STATE_DIR, $XDG_STATE_HOME/writ or ~/.local/state/writ.
func StateDir() string { return defaultStateDir() }

// ProjectConfig is where a worker config is looked for in the current
// directory before the state directory.
const ProjectConfig = ".writ/worker.json"

// maxConfigBytes bounds the worker config file.
const maxConfigBytes = 64 << 10

// workerConfig is the small file that places one agent runtime: its worker
// id (which must be its NATS user), the lane of its main session, the lane
// of each subagent type, and how to reach NATS. For example:
//
//	{"worker": "w1", "lane": "coordinator",
//	 "subagents": {"Explore": "isolated", "general-purpose": "specialist",
//	   "reviewer": {"lane": "specialist", "tools": ["Read", "Grep"], "ttl": "30m"}},
//	 "replace_prompt": false, "nats_url": "nats://127.0.0.1:4222",
//	 "provenance": {"max_bytes": 10485760}, "route": "inbox-triage@acme"}
//
// A subagent type that is not listed runs in the lane of the "*" entry; if
// there is none, its calls are blocked. An entry is a lane, or an object
// with the lane and a narrower spawn scope for the type's child worker
// (see subagentSpec). Fields are matched exactly and
// unknown fields are refused: a typo must not silently change a lane.
type workerConfig struct {
	Worker           string                  `json:"worker"`
	Lane             string                  `json:"lane"`
	Subagents        map[string]subagentSpec `json:"subagents,omitempty"`
	ReplacePrompt    bool                    `json:"replace_prompt,omitempty"`
	NATSURL          string                  `json:"nats_url,omitempty"`
	NATSUser         string                  `json:"nats_user,omitempty"`
	NATSPasswordFile string                  `json:"nats_password_file,omitempty"`
	NATSCA           string                  `json:"nats_ca,omitempty"`
	// NATSCreds is a .creds file (issuer auth mint --worker), for an
	// issuer in NATS operator mode; it replaces nats_user.
	NATSCreds string `json:"nats_creds,omitempty"`
	// NATSLeaderAffinity, when set, turns leader affinity on or off (see
	// connect.Affinity) unless --nats-leader-affinity is given.
	NATSLeaderAffinity *bool            `json:"nats_leader_affinity,omitempty"`
	Socket             string           `json:"socket,omitempty"`
	Provenance         provenanceConfig `json:"provenance,omitzero"`
	// Route is the route this runtime's calls are work under, when
	// WRIT_ROUTE does not name one (worker-agent cron sets it for its
	// command); the grants bind the owner's current lease generation.
	Route string `json:"route,omitempty"`
	// SubagentsAsWorkers false keeps a subagent's calls in this worker's
	// name (in the subagent's lane), as before fleets. By default (absent
	// or true) each subagent is a spawned child worker of its own (see
	// subagentChild), so that revoking this worker stops its subagents.
	SubagentsAsWorkers *bool `json:"subagents_as_workers,omitempty"`

	path    string // the file it was read from; "" when there was none
	project bool   // it is the project's own .writ/worker.json
}

// provenanceConfig tunes the per-session provenance registry (see
// sources.go).
type provenanceConfig struct {
	// MaxBytes bounds the content windows one session's registry keeps;
	// 0 means provenance.DefaultMaxBytes. Past it the oldest windows of
	// the largest source are evicted (reported as pressure). It applies to
	// registries created from then on: an existing session's file keeps
	// the bound it was created with.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// Bounds on provenance.max_bytes.
const (
	minRegistryBytes = 64 << 10
	maxRegistryBytes = 1 << 30
)

// maxBytes is the effective registry bound.
func (p provenanceConfig) maxBytes() int64 {
	if p.MaxBytes == 0 {
		return provenance.DefaultMaxBytes
	}
	return p.MaxBytes
}

// replacePrompt reports whether permits may answer "allow". Only a config
// outside the workspace may say so: the project's .writ/worker.json is a
// file the agent itself can edit, and "allow" skips the harness's own
// permission prompt.
func (c *workerConfig) replacePrompt() bool { return c.ReplacePrompt && !c.project }

// loadConfig reads and validates a worker config file.
func loadConfig(path string) (*workerConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	if len(raw) > maxConfigBytes {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, maxConfigBytes)
	}
	if err := checkExactKeys(raw); err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	var c workerConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("config %s: trailing data after the JSON object", path)
	}
	c.path = path
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	return &c, nil
}

// checkExactKeys refuses top-level keys that differ from the declared ones
// only in case ("Lane"), which encoding/json would otherwise accept.
func checkExactKeys(raw []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	if err := onlyKeys(m, "", "worker", "lane", "subagents", "replace_prompt", "nats_url", "nats_user", "nats_password_file", "nats_ca", "nats_creds", "nats_leader_affinity", "socket", "provenance", "route", "subagents_as_workers"); err != nil {
		return err
	}
	if raw, ok := m["provenance"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("provenance: want an object: %v", err)
		}
		return onlyKeys(p, "provenance.", "max_bytes")
	}
	return nil
}

// onlyKeys refuses a key of m that is not one of keys, naming it with
// prefix.
func onlyKeys(m map[string]json.RawMessage, prefix string, keys ...string) error {
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	for _, k := range sortedKeys(m) {
		if !known[k] {
			return fmt.Errorf("unknown field %q", prefix+k)
		}
	}
	return nil
}

func (c *workerConfig) validate() error {
	if c.Worker != "" {
		if err := api.ValidID(c.Worker); err != nil {
			return fmt.Errorf("worker: %v", err)
		}
	}
	if c.Lane != "" {
		if err := api.ValidID(c.Lane); err != nil {
			return fmt.Errorf("lane: %v", err)
		}
	}
	if c.Route != "" {
		if err := api.ValidRoute(c.Route); err != nil {
			return fmt.Errorf("route: %v", err)
		}
	}
	for _, typ := range sortedKeys(c.Subagents) {
		if typ == "" {
			return errors.New("subagents: an agent type is empty")
		}
		if err := c.Subagents[typ].validate("subagents." + typ); err != nil {
			return err
		}
	}
	if mb := c.Provenance.MaxBytes; mb != 0 && (mb < minRegistryBytes || mb > maxRegistryBytes) {
		return fmt.Errorf("provenance.max_bytes: %d is outside %d-%d (0 or absent: the default, %d)", mb, minRegistryBytes, maxRegistryBytes, provenance.DefaultMaxBytes)
	}
	if c.NATSUser != "" && c.NATSCreds != "" {
		return fmt.Errorf("nats_user %q and nats_creds %q: use one (a password user, or a credentials file for an issuer in operator mode)", c.NATSUser, c.NATSCreds)
	}
	if c.NATSUser != "" && c.Worker != "" && c.NATSUser != c.Worker {
		return fmt.Errorf("nats_user %q is not the worker %q: the issuer takes a worker's identity from its NATS user", c.NATSUser, c.Worker)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// laneFor returns the lane of the main session (agentType "") or of a
// subagent type.
func (c *workerConfig) laneFor(agentType string) (string, error) {
	if agentType == "" {
		if c.Lane == "" {
			return "", fmt.Errorf("no lane for the main session: set \"lane\" in %s or pass --lane", c.where())
		}
		return c.Lane, nil
	}
	sp, err := c.subagent(agentType)
	return sp.Lane, err
}

// subagent returns the declaration of a subagent type: its own entry,
// else the "*" entry. A type with neither has no lane: its subagent's
// calls, and the Task call that would start it, are refused.
func (c *workerConfig) subagent(agentType string) (subagentSpec, error) {
	if sp, ok := c.Subagents[agentType]; ok {
		return sp, nil
	}
	if sp, ok := c.Subagents["*"]; ok {
		return sp, nil
	}
	return subagentSpec{}, fmt.Errorf("no lane for subagent type %q: add it (or \"*\") to \"subagents\" in %s", agentType, c.where())
}

func (c *workerConfig) where() string {
	if c.path == "" {
		return "the worker config (" + ProjectConfig + ")"
	}
	return c.path
}

// defaultStateDir is $XDG_STATE_HOME/writ, else ~/.local/state/writ.
func defaultStateDir() string {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "writ")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "writ")
	}
	return filepath.Join(os.TempDir(), "writ-state")
}

// SocketNone as --socket makes a hook connect directly, never through a
// sidecar (writ-hook passes it when the sidecar stopped answering).
const SocketNone = hookwire.SocketNone

// defaultSocket is the sidecar socket of a worker in a state directory.
func defaultSocket(stateDir, worker string) string {
	return filepath.Join(stateDir, "worker-"+worker+".sock")
}

// AdapterFlags are the flags the harness adapters (hook, mcp, run) share.
type AdapterFlags struct {
	config   string
	stateDir string
	socket   string
	lane     string
}

// Add registers the flags; laneHelp, when not empty, adds --lane, and
// socket adds --socket.
func (a *AdapterFlags) Add(f *pflag.FlagSet, laneHelp string, socket bool) {
	f.StringVar(&a.config, "config", os.Getenv(EnvConfig), "worker config file (default "+ProjectConfig+" here, then worker.json in the state dir; env "+EnvConfig+")")
	f.StringVar(&a.stateDir, "state-dir", "", "state directory (default $"+EnvStateDir+", $XDG_STATE_HOME/writ or ~/.local/state/writ)")
	if socket {
		f.StringVar(&a.socket, "socket", "", "sidecar socket (default worker-<worker>.sock in the state dir; "+SocketNone+": connect directly, never through a sidecar)")
	}
	if laneHelp != "" {
		f.StringVar(&a.lane, "lane", "", laneHelp)
	}
}

// resolve finds and reads the worker config, then applies it under the
// flags given on the command line: a flag beats the config, the config
// beats the environment. It fills g.Worker and g.Conn and returns the
// config (an empty one when no file exists and none was named).
func (a *AdapterFlags) resolve(flags *pflag.FlagSet, g *Agent) (*workerConfig, error) {
	if a.stateDir == "" {
		a.stateDir = defaultStateDir()
	}
	noSidecar := a.socket == SocketNone
	if noSidecar {
		a.socket = ""
	}
	a.stateDir, a.config, a.socket = g.abs(a.stateDir), g.abs(a.config), g.abs(a.socket)
	cfg := &workerConfig{}
	switch {
	case a.config != "":
		c, err := loadConfig(a.config)
		if err != nil {
			return nil, err
		}
		cfg = c
	default:
		for _, p := range []string{ProjectConfig, filepath.Join(a.stateDir, "worker.json")} {
			c, err := loadConfig(g.abs(p))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			c.project = p == ProjectConfig
			cfg = c
			break
		}
	}
	changed := flags.Changed
	if !changed("worker") && cfg.Worker != "" {
		g.Worker = cfg.Worker
	}
	if child := os.Getenv(EnvSpawned); child != "" {
		// Inside a spawned child: its identity and lane, whatever the
		// config (the parent's) says.
		if changed("worker") && g.Worker != child {
			return nil, fmt.Errorf("--worker %q inside spawned worker %q (%s): a child never acts as another worker", g.Worker, child, EnvSpawned)
		}
		g.Worker = child
		cfg.Subagents = nil
		if os.Getenv(connect.EnvCreds) != "" {
			// Its own NATS credential (operator mode), never the
			// parent's from the config.
			cfg.NATSCreds = ""
		}
		if l := os.Getenv(EnvSpawnedLane); l != "" {
			if a.lane == "" {
				a.lane = l
			}
			// A child's own subagents run in its lane.
			cfg.Subagents = map[string]subagentSpec{"*": {Lane: l}}
		}
	}
	for _, o := range []struct {
		flag string
		dst  *string
		v    string
	}{
		{"nats-url", &g.Conn.URL, cfg.NATSURL},
		{"nats-user", &g.Conn.User, cfg.NATSUser},
		{"nats-password-file", &g.Conn.PasswordFile, cfg.NATSPasswordFile},
		{"nats-ca", &g.Conn.CAFile, cfg.NATSCA},
		{"nats-creds", &g.Conn.CredsFile, cfg.NATSCreds},
	} {
		if !changed(o.flag) && o.v != "" {
			*o.dst = o.v
		}
	}
	if !changed("nats-leader-affinity") && cfg.NATSLeaderAffinity != nil {
		g.Conn.LeaderAffinity = *cfg.NATSLeaderAffinity
	}
	if a.lane != "" {
		if err := api.ValidID(a.lane); err != nil {
			return nil, fmt.Errorf("--lane: %v", strings.TrimPrefix(err.Error(), api.ErrBadToken.Error()+": "))
		}
		cfg.Lane = a.lane
	}
	if g.Worker == "" {
		return nil, fmt.Errorf("no worker id: set \"worker\" in %s, or pass --worker (env %s)", cfg.where(), EnvWorker)
	}
	if err := api.ValidID(g.Worker); err != nil {
		return nil, fmt.Errorf("worker: %v", strings.TrimPrefix(err.Error(), api.ErrBadToken.Error()+": "))
	}
	if g.Conn.User != "" && g.Conn.User != g.Worker {
		return nil, fmt.Errorf("NATS user %q is not the worker %q: the issuer takes a worker's identity from its NATS user", g.Conn.User, g.Worker)
	}
	if a.socket == "" && !noSidecar {
		a.socket = g.abs(cfg.Socket)
	}
	// Files named relative to the working directory, which for a hook
	// the sidecar runs is the hook process's, not the sidecar's.
	for _, p := range []*string{&g.Conn.PasswordFile, &g.Conn.CAFile, &g.Conn.CredsFile} {
		*p = g.abs(*p)
	}
	if a.socket == "" && !noSidecar {
		a.socket = defaultSocket(a.stateDir, g.Worker)
	}
	return cfg, nil
}
