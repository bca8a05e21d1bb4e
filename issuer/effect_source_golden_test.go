package issuer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// goldenEffectSource is the body of an effect_source request as
// api/client writes it (json.Marshal of api.EffectSourceRequest), kept in
// testdata/requests/effect_source.json: the encoding workers of this build
// send, which every later issuer must accept.
func goldenEffectSource() api.EffectSourceRequest {
	return api.EffectSourceRequest{V: api.Version, GrantID: "3f1c9a52-7d0e-4b8a-9c61-2e5f8d4b7a10", Outcome: "confirmed", Verifier: "claude-code",
		Source: api.SourceRequest{V: api.Version, ID: "src-cc-toolu_01", Session: "s-7f3a", Channel: "tool_result", Scope: "task",
			ContentDigest: "8bdeed46aa1e1cc6e16d8dc7ab0d2e9b2e0d33a7d48a4b1a3a8e1d2c7f8b5a61", Path: "url:https://docs.example.org/a",
			Tool: "WebFetch", Origins: []string{"u1"}, ModelMade: true}}
}

func TestEffectSourceGolden(t *testing.T) {
	stored, err := os.ReadFile(filepath.Join("testdata", "requests", "effect_source.json"))
	if err != nil {
		t.Fatal(err)
	}
	stored = bytes.TrimSpace(stored)
	enc, err := json.Marshal(goldenEffectSource())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, stored) {
		t.Fatalf("the encoding drifted from the golden body:\n got  %s\n want %s", enc, stored)
	}
	c, rerr := effectSourceCommand("w1", stored)
	if rerr != nil {
		t.Fatalf("the golden body is refused: %v", rerr)
	}
	digest, _ := events.ParseHash("8bdeed46aa1e1cc6e16d8dc7ab0d2e9b2e0d33a7d48a4b1a3a8e1d2c7f8b5a61")
	want := fsm.Command{Op: fsm.OpEffectSource, Caller: "w1", GrantID: "3f1c9a52-7d0e-4b8a-9c61-2e5f8d4b7a10", Outcome: "confirmed",
		Verifier: "claude-code", SourceID: "src-cc-toolu_01", Session: "s-7f3a", Channel: "tool_result", Scope: "task",
		ContentDigest: digest, Path: "url:https://docs.example.org/a", Tool: "WebFetch", Origins: []string{"u1"}, ModelMade: true}
	if g, w := c.AppendEncode(nil), want.AppendEncode(nil); !bytes.Equal(g, w) {
		t.Fatalf("the golden body builds\n %+v\nwant\n %+v", c, want)
	}
}
