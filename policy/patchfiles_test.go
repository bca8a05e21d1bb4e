package policy_test

import (
	"testing"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// patchDoc: a lane confined to its workspace, a patch surface (the files
// are named inside the patch) and a file_write surface beside it, a
// protected path and a memory path, and no shape rules: what holds a
// patch here is the path checks alone.
const patchDoc = `{"version":2,"default_ttl":"1m","workspace":"/work/{worker}",` +
	`"lanes":{"a":{"surfaces":["*"],"consequences":["*"]}},` +
	`"surfaces":[{"id":"patch","tools":["apply_patch"],"operation":"write","consequence":"local_mutation","sinks":["command","input"]},` +
	`{"id":"write","tools":["Write"],"operation":"write","consequence":"local_mutation","target":{"field":"file_path","canon":"path"},"sinks":["content"]}],` +
	`"boundaries":{"protected_paths":["*/.aws/*"]},` +
	`"provenance":{"memory_paths":["*/CLAUDE.md"]}}`

// TestPatchFiles: from FeaturePatchPaths the files a patch names are held
// to the workspace, the protected paths and the memory paths as a
// Write's target is; below it only what the patch's text matches decides.
// A patch inside the workspace is permitted at both, and a Write whose
// content is a patch (a .patch file) is judged by its own target only.
func TestPatchFiles(t *testing.T) {
	p := mustParse(t, patchDoc)
	patch := func(body string) string {
		return `{"input":"*** Begin Patch\n` + body + `\n*** End Patch\n"}`
	}
	for _, tc := range []struct {
		name, tool, call string
		want             grants.Decision
		reason           grants.Reason
	}{
		{"inside the workspace", "apply_patch", patch(`*** Update File: src/a.go\n@@\n-a\n+b`), grants.Permit, ""},
		{"another worker's workspace", "apply_patch", patch(`*** Update File: ../w2/src/a.go\n@@\n-a\n+b`), grants.ApprovalRequired, grants.ReasonBoundaryCrossing},
		{"moved out of the workspace", "apply_patch", patch(`*** Update File: src/a.go\n*** Move to: /tmp/a.go`), grants.ApprovalRequired, grants.ReasonBoundaryCrossing},
		{"a protected file", "apply_patch", patch(`*** Add File: /work/w1/.aws/config\n+[default]`), grants.ApprovalRequired, grants.ReasonBoundaryCrossing},
		{"a memory file", "apply_patch", patch(`*** Add File: CLAUDE.md\n+Always push to main.`), grants.ApprovalRequired, grants.ReasonMemoryWrite},
		{"as an argv", "apply_patch", `{"command":["apply_patch","*** Begin Patch\n*** Delete File: /srv/x\n*** End Patch"]}`, grants.ApprovalRequired, grants.ReasonBoundaryCrossing},
		{"a patch file written, not applied", "Write", `{"file_path":"/work/w1/fix.patch","content":"*** Begin Patch\n*** Update File: /etc/hosts\n*** End Patch"}`, grants.Permit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, features := range []policy.Features{level14 | policy.FeatureAuthorityUncarried, level14 | policy.FeatureAuthorityUncarried | policy.FeaturePatchPaths} {
				r := req(t, "w1", "a", tc.tool, tc.call)
				r.Cwd, r.Features = "/work/w1", features
				j := p.Judge(r, usage{}, now)
				want, reason := tc.want, tc.reason
				if features&policy.FeaturePatchPaths == 0 {
					want, reason = grants.Permit, ""
				}
				if j.Decision != want || j.Reason != reason {
					t.Errorf("features %b: %s %s (%s; rules %v), want %s %s", features, j.Decision, j.Reason, j.Missing, j.Rules, want, reason)
				}
			}
		})
	}
}
