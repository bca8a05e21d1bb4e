package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/writ-dev/writ/harness"
)

// installTimeout is the hook timeout (seconds) written into harness
// settings: comfortably above the hook's own --deadline, so the hook always
// gives up (and blocks) before the harness kills it (and proceeds).
const installTimeout = 30

// target is one harness's settings file layout.
type target struct {
	harness string
	dir     string // settings directory under the project or home
	file    string
	events  []string
	matcher string
}

var targets = map[string]target{
	harness.ClaudeCode: {harness.ClaudeCode, ".claude", "settings.json", harness.ClaudeCodeEvents, "*"},
	// Codex reads the same layout from hooks.json; no matcher matches
	// every tool.
	harness.Codex: {harness.Codex, ".codex", "hooks.json", harness.CodexEvents, ""},
}

// InstallFlags are the flags of install and uninstall.
type InstallFlags struct {
	Project  string // the project directory; "" for the current one
	User     bool   // the user-level settings instead
	Config   string // the worker config the hook reads
	Binary   string // the worker-agent the hook runs; "" for this executable
	StateDir string
	// HookClient is HookClientAuto (writ-hook beside Binary, when present
	// and Config is given) or HookClientNone (worker-agent itself).
	HookClient string
}

// The values of InstallFlags.HookClient.
const (
	HookClientAuto = "auto"
	HookClientNone = "none"
)

// HookClientName is the thin hook client's file name, beside worker-agent.
const HookClientName = "writ-hook"

// KnownHarness reports whether install, uninstall and doctor know the
// harness name.
func KnownHarness(name string) bool {
	_, ok := targets[name]
	return ok
}

// Install merges writ's hook entries into the settings of the harness
// name (install), or removes them (uninstall).
func (g *Agent) Install(name string, f InstallFlags, install bool) error {
	t, ok := targets[name]
	if !ok {
		return Usagef("unknown harness %q: want claude-code or codex", name)
	}
	return g.install(t, f, install)
}

// settingsPath is the settings file of t for the flags.
func settingsPath(t target, project string, user bool) (string, error) {
	if user && project != "" {
		return "", Usagef("give --project or --user, not both")
	}
	base := project
	if user {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", Usagef("--user: %v", err)
		}
		base = h
	}
	if base == "" {
		base = "."
	}
	path, err := filepath.Abs(filepath.Join(base, t.dir, t.file))
	if err != nil {
		return "", Usagef("%v", err)
	}
	// A settings file kept as a symlink (dotfile managers) is updated
	// where it points, not replaced by a regular file.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path, nil
}

func (g *Agent) install(t target, f InstallFlags, install bool) error {
	path, err := settingsPath(t, f.Project, f.User)
	if err != nil {
		return err
	}
	if f.StateDir == "" {
		f.StateDir = defaultStateDir()
	}
	owns := harness.OwnsCommand(t.harness)
	var spec harness.HookSpec
	if install {
		if spec, err = hookSpec(t, f); err != nil {
			return err
		}
		if f.Config == "" {
			g.warnNoConfig(f)
		}
	}
	doc, mode, err := readSettings(path)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if !install {
		return g.uninstall(path, doc, f.StateDir, func(doc []byte) ([]byte, bool, error) { return harness.UninstallHooks(doc, owns) })
	}
	out, changed, err := harness.InstallHooks(doc, spec)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %v", path, err)}
	}
	if !changed {
		fmt.Fprintf(g.Stdout, "writ hooks already installed in %s\n", path)
		return nil
	}
	// The file as it was before writ touched it, for uninstall. Kept from
	// the first install: a reinstall over writ's own entries must not
	// replace the original with them.
	if _, had, _ := harness.UninstallHooks(doc, owns); !had {
		if err := saveInstallRecord(f.StateDir, installRecord{Path: path, Existed: doc != nil, Mode: uint32(mode), Before: doc, CreatedDirs: missingDirs(filepath.Dir(path))}); err != nil {
			fmt.Fprintf(g.Stderr, "worker-agent: warning: keeping a copy of %s for uninstall: %v (uninstall will still remove writ's entries)\n", path, err)
		}
	}
	if err := writeAtomic(path, out, mode); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	fmt.Fprintf(g.Stdout, "installed writ hooks for %s in %s (%s): %s\n", t.harness, path, strings.Join(t.events, ", "), spec.Command)
	return nil
}

// uninstall removes writ's entries from the settings file at path: back
// to its original bytes when nothing else changed since install, removed
// when install created it, else the rest of the document kept.
func (g *Agent) uninstall(path string, doc []byte, stateDir string, remove func([]byte) ([]byte, bool, error)) error {
	out, changed, err := remove(doc)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %v", path, err)}
	}
	if !changed {
		fmt.Fprintf(g.Stdout, "no writ hooks in %s\n", path)
		return nil
	}
	rec, rerr := loadInstallRecord(stateDir, path)
	if rerr != nil {
		fmt.Fprintf(g.Stderr, "worker-agent: warning: %v; removing writ's entries only\n", rerr)
	}
	switch {
	case rec != nil && !rec.Existed && harness.SameSettings(out, nil):
		if err := os.Remove(path); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		for i := len(rec.CreatedDirs) - 1; i >= 0; i-- {
			_ = os.Remove(rec.CreatedDirs[i]) // only if empty
		}
		dropInstallRecord(stateDir, path)
		fmt.Fprintf(g.Stdout, "removed writ hooks: deleted %s, which install had created\n", path)
		return nil
	case rec != nil && rec.Existed && harness.SameSettings(out, rec.Before):
		if err := writeAtomic(path, rec.Before, os.FileMode(rec.Mode).Perm()); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		dropInstallRecord(stateDir, path)
		fmt.Fprintf(g.Stdout, "removed writ hooks: restored %s as it was before install\n", path)
		return nil
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := writeAtomic(path, out, mode); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if rec != nil {
		dropInstallRecord(stateDir, path)
	}
	fmt.Fprintf(g.Stdout, "removed writ hooks from %s\n", path)
	return nil
}

// hookSpec is the hook entry for t: the wrapped command running the
// absolute path of the binary, "hook <harness>", and --config when one
// was named. The binary and the config are checked first: a hook that
// cannot run blocks every call.
func hookSpec(t target, f InstallFlags) (harness.HookSpec, error) {
	bin := f.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return harness.HookSpec{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("finding this executable (pass --binary): %v", err)}
		}
		bin = exe
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return harness.HookSpec{}, Usagef("--binary: %v", err)
	}
	if err := checkExecutable(bin); err != nil {
		return harness.HookSpec{}, Usagef("--binary %s: %v; give the path of an installed worker-agent", bin, err)
	}
	args := []string{"hook", t.harness}
	if f.Config != "" {
		c, err := filepath.Abs(f.Config)
		if err != nil {
			return harness.HookSpec{}, Usagef("--config: %v", err)
		}
		if err := checkInstallConfig(c); err != nil {
			return harness.HookSpec{}, err
		}
		args = append(args, "--config", c)
		switch f.HookClient {
		case "", HookClientAuto:
			if thin := filepath.Join(filepath.Dir(bin), HookClientName); checkExecutable(thin) == nil {
				socket, err := installSocket(c, f.StateDir)
				if err != nil {
					return harness.HookSpec{}, err
				}
				bin, args = thin, append(args, "--socket", socket)
			}
		case HookClientNone:
		default:
			return harness.HookSpec{}, Usagef("--hook-client %q: want %s or %s", f.HookClient, HookClientAuto, HookClientNone)
		}
	}
	cmd, err := harness.HookCommand(t.harness, bin, args...)
	if err != nil {
		return harness.HookSpec{}, Usagef("%v", err)
	}
	return harness.HookSpec{
		Events: t.events, Matcher: t.matcher, Command: cmd,
		Timeout: installTimeout, Owns: harness.OwnsCommand(t.harness),
	}, nil
}

// installSocket is the sidecar socket of the worker the config at path
// names, as worker-agent run finds it with that config: the config's
// "socket", else worker-<worker>.sock in the state directory.
func installSocket(path, stateDir string) (string, error) {
	c, err := loadConfig(path)
	if err != nil {
		return "", Usagef("--config: %v", err)
	}
	socket := c.Socket
	if socket == "" {
		socket = defaultSocket(stateDir, c.Worker)
	}
	abs, err := filepath.Abs(socket)
	if err != nil {
		return "", Usagef("the sidecar socket %s: %v", socket, err)
	}
	return abs, nil
}

// checkExecutable reports why path cannot be run as a program.
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return errors.Unwrap(err) // "no such file or directory", ...
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}

// checkInstallConfig refuses a worker config the hook could not use:
// missing, unreadable, malformed, or without the worker id or the main
// session's lane.
func checkInstallConfig(path string) error {
	c, err := loadConfig(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Usagef("--config %s: no such file; create it first (for example {\"worker\": \"w1\", \"lane\": \"coordinator\", \"nats_url\": \"nats://127.0.0.1:4222\"}; see docs/harnesses.md), then run install again", path)
	case err != nil:
		return Usagef("--config: %v; fix the file, then run install again", strings.TrimPrefix(err.Error(), "config "))
	}
	var missing []string
	if c.Worker == "" {
		missing = append(missing, `"worker" (the worker id, its NATS user)`)
	}
	if c.Lane == "" {
		missing = append(missing, `"lane" (the main session's lane)`)
	}
	if len(missing) > 0 {
		return Usagef("--config %s: %s missing: the hook would block every call; add them, then run install again", path, strings.Join(missing, " and "))
	}
	if c.NATSUser != "" && c.NATSPasswordFile == "" {
		return Usagef("--config %s: nats_user %q needs nats_password_file", path, c.NATSUser)
	}
	for _, f := range []struct{ field, path string }{{"nats_password_file", c.NATSPasswordFile}, {"nats_ca", c.NATSCA}, {"nats_creds", c.NATSCreds}} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return Usagef("--config %s: %s: %v", path, f.field, errors.Unwrap(err))
		}
		fh.Close()
	}
	return nil
}

// warnNoConfig warns when the hook, installed without --config, would
// find no worker config where it looks.
func (g *Agent) warnNoConfig(f InstallFlags) {
	base := f.Project
	if base == "" {
		base = "."
	}
	candidates := []string{filepath.Join(f.StateDir, "worker.json")}
	if !f.User {
		candidates = append([]string{filepath.Join(base, ProjectConfig)}, candidates...)
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	fmt.Fprintf(g.Stderr, "worker-agent: warning: no worker config at %s: until one exists the hook blocks every call; pass --config FILE (see 'worker-agent install --help')\n", strings.Join(candidates, " or "))
}

// missingDirs lists dir and the parents of it that do not exist yet,
// outermost first: the directories writeAtomic will create.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		out = append([]string{d}, out...)
		if filepath.Dir(d) == d {
			break
		}
	}
	return out
}

// installRecord is what install keeps in the state dir about a settings
// file it changed: what the file was before writ's first entry went in.
type installRecord struct {
	Path        string   `json:"path"`
	Existed     bool     `json:"existed"`
	Mode        uint32   `json:"mode"`
	Before      []byte   `json:"before"`
	CreatedDirs []string `json:"created_dirs,omitempty"`
}

func installRecordPath(stateDir, settings string) string {
	sum := sha256.Sum256([]byte(settings))
	return filepath.Join(stateDir, "installed", hex.EncodeToString(sum[:12])+".json")
}

func saveInstallRecord(stateDir string, rec installRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p := installRecordPath(stateDir, rec.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return writeAtomic(p, b, 0o600)
}

// loadInstallRecord returns the record of settings, nil when there is
// none.
func loadInstallRecord(stateDir, settings string) (*installRecord, error) {
	p := installRecordPath(stateDir, settings)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", p, err)
	}
	var rec installRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Path != settings {
		return nil, fmt.Errorf("%s is not the install record of %s", p, settings)
	}
	return &rec, nil
}

func dropInstallRecord(stateDir, settings string) {
	_ = os.Remove(installRecordPath(stateDir, settings))
}

// readSettings returns the file's bytes and mode (nil and 0644 when it
// does not exist).
func readSettings(path string) ([]byte, os.FileMode, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, harness.MaxSettingsBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > harness.MaxSettingsBytes {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", path, harness.MaxSettingsBytes)
	}
	return b, st.Mode().Perm(), nil
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".writ-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}
