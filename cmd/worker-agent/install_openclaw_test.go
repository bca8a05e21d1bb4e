package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// pluginDir is the repository's integrations/openclaw directory.
func pluginDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	d, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "integrations", "openclaw"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// An OpenClaw config as people keep it: their own plugins, an allow
// list, other sections, tabs and no final newline.
const openClawConfig = "{\n\t\"agents\": {\"defaults\": {\"model\": {\"primary\": \"anthropic/claude-sonnet-4-5\"}}},\n\t\"plugins\": {\n\t\t\"allow\": [\"memory-core\"],\n\t\t\"entries\": {\"memory-core\": {\"enabled\": true}},\n\t\t\"load\": {\"paths\": [\"~/.openclaw/extensions/memory-core\"]}\n\t}\n}"

func TestInstallOpenClaw(t *testing.T) {
	isolateInstall(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "openclaw.json")
	if err := os.WriteFile(cfg, []byte(openClawConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "ops.password")
	_ = os.WriteFile(pw, []byte("x"), 0o600)
	install := []string{"install", "openclaw", "--config", cfg, "--plugin-dir", pluginDir(t),
		"--agent", "main=w1:coordinator", "--agent", "research=w2:isolated", "--socket", filepath.Join(dir, "w.sock"),
		"--reviewer-user", "gateway-ops", "--reviewer-password-file", pw}
	for i := 0; i < 2; i++ { // the second install changes nothing
		if r := runCLI(t, "", install...); r.code != 0 {
			t.Fatalf("install #%d: %+v", i+1, r)
		}
	}
	b, _ := os.ReadFile(cfg)
	var doc struct {
		Agents  map[string]any `json:"agents"`
		Plugins struct {
			Allow   []string `json:"allow"`
			Entries map[string]struct {
				Enabled bool `json:"enabled"`
				Config  struct {
					Socket string                       `json:"socket"`
					Agents map[string]map[string]string `json:"agents"`
					Review map[string]string            `json:"reviewer"`
				} `json:"config"`
			} `json:"entries"`
			Load struct {
				Paths []string `json:"paths"`
			} `json:"load"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	e := doc.Plugins.Entries["writ"]
	if !e.Enabled || e.Config.Agents["main"]["lane"] != "coordinator" || e.Config.Agents["research"]["worker"] != "w2" ||
		e.Config.Socket != filepath.Join(dir, "w.sock") || e.Config.Review["user"] != "gateway-ops" || e.Config.Review["passwordFile"] != pw {
		t.Fatalf("the writ entry: %+v\n%s", e, b)
	}
	if !doc.Plugins.Entries["memory-core"].Enabled || doc.Agents["defaults"] == nil {
		t.Fatalf("install dropped what was there:\n%s", b)
	}
	if strings.Join(doc.Plugins.Allow, ",") != "memory-core,writ" || strings.Join(doc.Plugins.Load.Paths, ",") != "~/.openclaw/extensions/memory-core,"+pluginDir(t) {
		t.Fatalf("allow %v, paths %v", doc.Plugins.Allow, doc.Plugins.Load.Paths)
	}

	// Uninstall puts the file back byte for byte.
	r := runCLI(t, "", "uninstall", "openclaw", "--config", cfg)
	got, _ := os.ReadFile(cfg)
	if r.code != 0 || string(got) != openClawConfig || !strings.Contains(r.stdout, "restored") {
		t.Fatalf("uninstall: %+v\n%q", r, got)
	}

	// Edited since install: exactly writ's entry, path and allow go.
	if r := runCLI(t, "", install...); r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	b, _ = os.ReadFile(cfg)
	_ = os.WriteFile(cfg, []byte(strings.Replace(string(b), "claude-sonnet-4-5", "claude-opus-4-1", 1)), 0o600)
	if r := runCLI(t, "", "uninstall", "openclaw", "--config", cfg); r.code != 0 {
		t.Fatalf("uninstall: %+v", r)
	}
	b, _ = os.ReadFile(cfg)
	if strings.Contains(string(b), `"writ"`) || strings.Contains(string(b), pluginDir(t)) || !strings.Contains(string(b), "claude-opus-4-1") ||
		!strings.Contains(string(b), `"memory-core"`) || !strings.Contains(string(b), "extensions/memory-core") {
		t.Fatalf("uninstall after an edit:\n%s", b)
	}

	// A config install created is removed.
	fresh := filepath.Join(t.TempDir(), "oc", "openclaw.json")
	if r := runCLI(t, "", "install", "openclaw", "--config", fresh, "--plugin-dir", pluginDir(t), "--agent", "main=w1:coordinator"); r.code != 0 {
		t.Fatalf("install into a new file: %+v", r)
	}
	if r := runCLI(t, "", "uninstall", "openclaw", "--config", fresh); r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("uninstall of a created file: %+v", r)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Fatalf("the directory install created is still there: %v", err)
	}
}

func TestInstallOpenClawRefuses(t *testing.T) {
	isolateInstall(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "openclaw.json")
	json5 := "{\n  // comments are JSON5\n  plugins: {},\n}\n"
	_ = os.WriteFile(cfg, []byte(json5), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "openclaw", "--config", cfg, "--plugin-dir", pluginDir(t), "--agent", "main=w1:coordinator"}, "JSON5"},
		{[]string{"install", "openclaw", "--config", cfg}, "--plugin-dir"},
		{[]string{"install", "openclaw", "--config", cfg, "--plugin-dir", dir}, "no openclaw.plugin.json"},
		{[]string{"install", "openclaw", "--config", cfg, "--plugin-dir", pluginDir(t), "--agent", "main"}, "AGENT_ID=WORKER:LANE"},
		{[]string{"install", "openclaw", "--config", cfg, "--plugin-dir", pluginDir(t), "--agent", "main=w1:coordinator", "--reviewer-user", "w1", "--reviewer-password-file", cfg}, "not a worker"},
		{[]string{"install", "openclaw", "--project", dir, "--plugin-dir", pluginDir(t)}, "not --project"},
		{[]string{"install", "claude-code", "--project", dir, "--agent", "main=w1:coordinator"}, "openclaw only"},
	} {
		r := runCLI(t, "", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit 2 naming %q, got %+v", c.args, c.want, r)
		}
	}
	if got, _ := os.ReadFile(cfg); string(got) != json5 {
		t.Fatalf("a refused install changed the file:\n%s", got)
	}
}
