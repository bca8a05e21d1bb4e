package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/connect"
)

// nats_leader_affinity in the worker config turns leader affinity on or
// off; --nats-leader-affinity beats it, and without either it is on.
func TestConfigLeaderAffinity(t *testing.T) {
	t.Setenv(connect.EnvLeaderAffinity, "")
	dir := t.TempDir()
	for i, tc := range []struct {
		body string
		args []string
		want bool
	}{
		{`{"worker":"w1"}`, nil, true},
		{`{"worker":"w1","nats_leader_affinity":false}`, nil, false},
		{`{"worker":"w1","nats_leader_affinity":true}`, nil, true},
		{`{"worker":"w1","nats_leader_affinity":false}`, []string{"--nats-leader-affinity=true"}, true},
		{`{"worker":"w1","nats_leader_affinity":true}`, []string{"--nats-leader-affinity=false"}, false},
	} {
		p := filepath.Join(dir, "c.json")
		if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		g := &Agent{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		g.Conn.AddFlags(fs)
		var af AdapterFlags
		af.Add(fs, "lane", false)
		if err := fs.Parse(append([]string{"--config", p, "--state-dir", dir}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if _, err := af.resolve(fs, g); err != nil {
			t.Fatalf("%d %s: %v", i, tc.body, err)
		}
		if g.Conn.LeaderAffinity != tc.want {
			t.Errorf("%d %s %v: leader affinity %v, want %v", i, tc.body, tc.args, g.Conn.LeaderAffinity, tc.want)
		}
	}
	p := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(p, []byte(`{"worker":"w1","nats_leader_affinity":"yes"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(p); err == nil || !strings.Contains(err.Error(), "nats_leader_affinity") {
		t.Errorf("a string nats_leader_affinity: %v", err)
	}
}
