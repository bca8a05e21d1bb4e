package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/harness"
)

// OpenClawPluginID is the id of writ's OpenClaw plugin
// (integrations/openclaw/openclaw.plugin.json).
const OpenClawPluginID = "writ"

// EnvOpenClawConfig names the OpenClaw config file, as OpenClaw reads it.
const EnvOpenClawConfig = "OPENCLAW_CONFIG_PATH"

// OpenClawFlags are the flags of install and uninstall openclaw beside
// InstallFlags (whose Config names the OpenClaw config file here).
type OpenClawFlags struct {
	PluginDir      string   // the integrations/openclaw directory
	Socket         string   // the sidecar socket; "" for each worker's default
	Agents         []string // agentId=worker:lane
	ReviewerUser   string
	ReviewerPWFile string
}

// openClawConfigPath is the OpenClaw config install edits: --config, else
// $OPENCLAW_CONFIG_PATH, else ~/.openclaw/openclaw.json.
func openClawConfigPath(flag string) (string, error) {
	p := flag
	if p == "" {
		p = os.Getenv(EnvOpenClawConfig)
	}
	if p == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", Usagef("no home directory for ~/.openclaw/openclaw.json (pass --config): %v", err)
		}
		p = filepath.Join(h, ".openclaw", "openclaw.json")
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", Usagef("--config: %v", err)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p, nil
}

// InstallOpenClaw merges writ's plugin entry into the OpenClaw config
// (install), or removes exactly it (uninstall): back to the file's
// original bytes when nothing else changed since install.
func (g *Agent) InstallOpenClaw(f InstallFlags, o OpenClawFlags, install bool) error {
	path, err := openClawConfigPath(f.Config)
	if err != nil {
		return err
	}
	if f.StateDir == "" {
		f.StateDir = defaultStateDir()
	}
	doc, mode, err := readSettings(path)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	dir := ""
	if o.PluginDir != "" {
		if dir, err = filepath.Abs(o.PluginDir); err != nil {
			return Usagef("--plugin-dir: %v", err)
		}
	}
	if !install {
		owns := func(p string) bool { return (dir != "" && filepath.Clean(p) == dir) || isWritPluginDir(p) }
		return g.uninstall(path, doc, f.StateDir, func(doc []byte) ([]byte, bool, error) {
			out, changed, err := harness.UninstallOpenClawPlugin(doc, OpenClawPluginID, owns)
			if err != nil {
				return nil, false, fmt.Errorf("%v (OpenClaw also reads JSON5; install and uninstall edit only plain JSON)", err)
			}
			return out, changed, nil
		})
	}
	if dir == "" {
		return Usagef("--plugin-dir: name the directory holding writ's OpenClaw plugin (integrations/openclaw)")
	}
	if !isWritPluginDir(dir) {
		return Usagef("--plugin-dir %s: no openclaw.plugin.json with id %q there", dir, OpenClawPluginID)
	}
	cfg, err := openClawPluginConfig(o, f.StateDir)
	if err != nil {
		return err
	}
	if cfg == nil {
		fmt.Fprintf(g.Stderr, "worker-agent: warning: no --agent given: the plugin keeps the agents an earlier install wrote, and blocks every call of an agent it does not list\n")
	}
	out, changed, err := harness.InstallOpenClawPlugin(doc, harness.OpenClawPlugin{ID: OpenClawPluginID, Dir: dir, Config: cfg})
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %v (OpenClaw also reads JSON5; install edits only plain JSON)", path, err)}
	}
	if !changed {
		fmt.Fprintf(g.Stdout, "writ plugin already installed in %s\n", path)
		return nil
	}
	owns := func(p string) bool { return filepath.Clean(p) == dir || isWritPluginDir(p) }
	if _, had, _ := harness.UninstallOpenClawPlugin(doc, OpenClawPluginID, owns); !had {
		if err := saveInstallRecord(f.StateDir, installRecord{Path: path, Existed: doc != nil, Mode: uint32(mode), Before: doc, CreatedDirs: missingDirs(filepath.Dir(path))}); err != nil {
			fmt.Fprintf(g.Stderr, "worker-agent: warning: keeping a copy of %s for uninstall: %v (uninstall will still remove writ's entry)\n", path, err)
		}
	}
	if err := writeAtomic(path, out, mode); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	fmt.Fprintf(g.Stdout, "installed the writ plugin in %s (plugins.entries.%s, plugins.load.paths %s)\n", path, OpenClawPluginID, dir)
	return nil
}

// isWritPluginDir reports whether dir holds writ's OpenClaw plugin.
func isWritPluginDir(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "openclaw.plugin.json"))
	if err != nil {
		return false
	}
	var m struct {
		ID string `json:"id"`
	}
	return json.Unmarshal(b, &m) == nil && m.ID == OpenClawPluginID
}

// openClawPluginConfig is the plugin's config from the flags; nil when no
// --agent was given.
func openClawPluginConfig(o OpenClawFlags, stateDir string) (json.RawMessage, error) {
	if len(o.Agents) == 0 {
		if o.Socket != "" || o.ReviewerUser != "" || o.ReviewerPWFile != "" {
			return nil, Usagef("--socket and --reviewer-* need at least one --agent")
		}
		return nil, nil
	}
	type agent struct {
		Worker string `json:"worker"`
		Lane   string `json:"lane"`
		Socket string `json:"socket,omitempty"`
	}
	agents := map[string]agent{}
	for _, a := range o.Agents {
		id, wl, ok1 := strings.Cut(a, "=")
		w, lane, ok2 := strings.Cut(wl, ":")
		if !ok1 || !ok2 || id == "" {
			return nil, Usagef("--agent %q: want AGENT_ID=WORKER:LANE", a)
		}
		if err := api.ValidID(w); err != nil {
			return nil, Usagef("--agent %q: worker: %v", a, err)
		}
		if err := api.ValidID(lane); err != nil {
			return nil, Usagef("--agent %q: lane: %v", a, err)
		}
		if _, dup := agents[id]; dup {
			return nil, Usagef("--agent: %s given twice", id)
		}
		ag := agent{Worker: w, Lane: lane}
		if o.Socket == "" {
			ag.Socket = defaultSocket(stateDir, w)
		}
		agents[id] = ag
	}
	if (o.ReviewerUser == "") != (o.ReviewerPWFile == "") {
		return nil, Usagef("--reviewer-user and --reviewer-password-file go together")
	}
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
		if o.ReviewerUser != "" && agents[id].Worker == o.ReviewerUser {
			return nil, Usagef("--reviewer-user %s is agent %s's worker: the reviewer must be an operator identity, not a worker", o.ReviewerUser, id)
		}
	}
	sort.Strings(ids)
	var b strings.Builder
	b.WriteString("{")
	if o.Socket != "" {
		s, err := filepath.Abs(o.Socket)
		if err != nil {
			return nil, Usagef("--socket: %v", err)
		}
		fmt.Fprintf(&b, `"socket":%s,`, mustJSON(s))
	}
	b.WriteString(`"agents":{`)
	for i, id := range ids {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s:%s", mustJSON(id), mustJSON(agents[id]))
	}
	b.WriteString("}")
	if o.ReviewerUser != "" {
		pw, err := filepath.Abs(o.ReviewerPWFile)
		if err != nil {
			return nil, Usagef("--reviewer-password-file: %v", err)
		}
		if _, err := os.Stat(pw); err != nil {
			return nil, Usagef("--reviewer-password-file: %v", err)
		}
		fmt.Fprintf(&b, `,"reviewer":{"user":%s,"passwordFile":%s}`, mustJSON(o.ReviewerUser), mustJSON(pw))
	}
	b.WriteString("}")
	return json.RawMessage(b.String()), nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v) // strings and plain structs always encode
	return string(b)
}
