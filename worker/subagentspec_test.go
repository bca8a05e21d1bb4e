package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A subagent type's declaration can only narrow: what would widen, or is
// not a scope at all, is refused when the config is loaded, naming the
// field.
func TestSubagentDeclarationsOnlyNarrow(t *testing.T) {
	dir := t.TempDir()
	load := func(subagents string) error {
		p := filepath.Join(dir, "w.json")
		if err := os.WriteFile(p, []byte(`{"worker":"w1","lane":"coordinator","subagents":`+subagents+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(p)
		return err
	}
	for _, ok := range []string{
		`{"Explore":"isolated"}`,
		`{"Explore":{"lane":"isolated"}}`,
		`{"reviewer":{"lane":"specialist","tools":["Read","Grep"],"classes":["local_read"],"targets":["path:/srv/repo/*"],"ttl":"30m"}}`,
	} {
		if err := load(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ subagents, field string }{
		{`{"Explore":"coordinator"}`, `subagents.Explore: "coordinator" would widen`},
		{`{"Explore":{"lane":"coordinator","tools":["Read"]}}`, `subagents.Explore.lane: "coordinator" would widen`},
		{`{"Explore":{"lane":"isolated","tools":["*"]}}`, `subagents.Explore.tools[0]: "*" would widen`},
		{`{"Explore":{"lane":"isolated","targets":["**"]}}`, `subagents.Explore.targets[0]: "**" would widen`},
		{`{"Explore":{"lane":"isolated","ttl":"9h"}}`, `subagents.Explore.ttl: 9h0m0s would widen`},
		{`{"Explore":{"lane":"isolated","ttl":"soon"}}`, `subagents.Explore.ttl:`},
		{`{"Explore":{"lane":"isolated","classes":["everything"]}}`, `subagents.Explore.classes[0]: "everything" is not a consequence class`},
		{`{"Explore":{"lane":"isolated","tools":["Read","Read"]}}`, `subagents.Explore.tools[1]: "Read" is listed twice`},
		{`{"Explore":{"lane":"isolated","Tools":["Read"]}}`, `unknown field "Tools"`},
		{`{"Explore":{"tools":["Read"]}}`, `subagents.Explore.lane:`},
		{`{"Explore":7}`, `want a lane name or an object`},
	} {
		err := load(tc.subagents)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error naming %s", tc.subagents, err, tc.field)
		}
	}
}

// Subagents of one type racing for the children spawned at their Task
// calls each claim exactly one, never the same one; two hook processes of
// one subagent end with the same claim; an ended child is not claimed.
func TestSubagentsClaimTaskChildrenOnce(t *testing.T) {
	dir := t.TempDir()
	until := strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)
	const n = 6
	for i := 0; i < n; i++ {
		child := TaskChildID("w1", "s1", "toolu_"+strconv.Itoa(i))
		if err := os.MkdirAll(filepath.Join(dir, "fleet"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "fleet", child), []byte(until+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := addPending(dir, "s1", "Explore", child); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu  sync.Mutex
		got = map[string][]string{} // agent -> children seen
		wg  sync.WaitGroup
	)
	for a := 0; a < n; a++ {
		for p := 0; p < 3; p++ { // three hook processes per subagent
			wg.Add(1)
			go func(agent string) {
				defer wg.Done()
				c, ok := claimPending(context.Background(), dir, "s1", "Explore", agent)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					got[agent] = append(got[agent], c)
				}
			}("agent_" + strconv.Itoa(a))
		}
	}
	wg.Wait()
	owner := map[string]string{}
	for agent, cs := range got {
		for _, c := range cs {
			if c != cs[0] {
				t.Fatalf("subagent %s got children %v", agent, cs)
			}
		}
		if o, dup := owner[cs[0]]; dup {
			t.Fatalf("child %s claimed by %s and %s", cs[0], o, agent)
		}
		owner[cs[0]] = agent
	}
	if len(got) != n {
		t.Fatalf("%d of %d subagents claimed a child: %v", len(got), n, got)
	}
	// Nothing left, and another type never sees these.
	if c, ok := claimPending(context.Background(), dir, "s1", "Explore", "agent_late"); ok {
		t.Fatalf("claimed %s with none pending", c)
	}
	// An ended pending child is dropped, not claimed.
	ended := TaskChildID("w1", "s1", "toolu_old")
	_ = os.WriteFile(filepath.Join(dir, "fleet", ended), []byte(strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10)+"\n"), 0o600)
	if err := addPending(dir, "s1", "Plan", ended); err != nil {
		t.Fatal(err)
	}
	if c, ok := claimPending(context.Background(), dir, "s1", "Plan", "agent_p"); ok {
		t.Fatalf("claimed ended child %s", c)
	}
}

// FuzzSubagentSpec: a declaration never panics the decoder, and one that
// decodes and validates reads back the same after encoding.
func FuzzSubagentSpec(f *testing.F) {
	for _, s := range []string{`"isolated"`, `{"lane":"specialist","tools":["Read"],"classes":["local_read"],"targets":["path:/a/*"],"ttl":"1h"}`,
		`{"lane":"x","Lane":"y"}`, `{"lane":"x"} `, `null`, `[]`, `{"lane":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var sp subagentSpec
		if json.Unmarshal([]byte(raw), &sp) != nil || sp.validate("subagents.T") != nil {
			return
		}
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatalf("%+v: %v", sp, err)
		}
		var back subagentSpec
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, sp) || back.validate("subagents.T") != nil {
			t.Fatalf("%s -> %s -> %+v (%v)", raw, b, back, err)
		}
	})
}
