package worker

import (
	"testing"

	authlevel "github.com/writ-dev/writ/authority"
)

// TestWithResource: a tool result takes the resource its grant target
// names as its path, under a source id that covers it; a result the
// harness already gave a path, a file read, or a target naming no
// resource (a shell command, a list) is left as it is.
func TestWithResource(t *testing.T) {
	result := newSource("s1", "c1", authlevel.ChannelToolResult, scopeTask, "", "mcp__fs__read_file", "r", []byte("text"))
	got := withResource(result, "path:/home/u/bills/a.txt", "s1", "c1")
	if got.req.Path != "/home/u/bills/a.txt" || got.req.ID == result.req.ID {
		t.Fatalf("path %q, id %s (was %s)", got.req.Path, got.req.ID, result.req.ID)
	}
	if again := withResource(result, "path:/home/u/bills/a.txt", "s1", "c1"); again.req.ID != got.req.ID {
		t.Fatal("the id is not a function of the registration")
	}
	if got := withResource(result, "raw:m-17", "s1", "c1"); got.req.Path != "raw:m-17" {
		t.Fatalf("raw resource: %q", got.req.Path)
	}
	for _, target := range []string{"", "shell:sha256:00", `list:["email:a@b.example"]`} {
		if got := withResource(result, target, "s1", "c1"); got.req.Path != "" || got.req.ID != result.req.ID {
			t.Errorf("target %q changed the registration: %+v", target, got.req)
		}
	}
	read := newSource("s1", "c1", authlevel.ChannelFileRead, scopeTask, "/a/b", "Read", "r", []byte("text"))
	if got := withResource(read, "path:/x", "s1", "c1"); got.req.Path != "/a/b" {
		t.Errorf("a file read's own path was replaced: %q", got.req.Path)
	}
}
