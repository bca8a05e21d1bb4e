package raftnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestSlogLogger: raft's hclog calls come out as slog records of the
// process's handler: names joined, implied and call arguments kept, keys
// the handler owns (node, term, index, logger) renamed rather than
// repeated, errors written as their text, and lines below the raft level
// dropped.
func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", "n1")
	h := SlogLogger(lg)
	h.SetLevel(hclog.Info)
	h.Named("snapshots").With("path", "/d").Info("creating snapshot", "node", "raft-node", "err", errors.New("disk full"), "odd")
	h.Debug("dropped: below the raft level")
	h.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("from the standard logger")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"msg": "creating snapshot", "level": "INFO", "logger": "raft.snapshots", "node": "n1",
		"raft_node": "raft-node", "path": "/d", "err": "disk full", hclog.MissingKey: "odd"}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, first[k], v, lines[0])
		}
	}
	if strings.Count(lines[0], `"node"`) != 1 {
		t.Errorf("node repeated: %s", lines[0])
	}
	if second["msg"] != "from the standard logger" || second["level"] != "WARN" {
		t.Errorf("standard logger line: %s", lines[1])
	}
	if h.IsDebug() || !h.IsInfo() {
		t.Errorf("IsDebug %v IsInfo %v at level info", h.IsDebug(), h.IsInfo())
	}
}
