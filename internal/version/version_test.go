package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5c52e87535e974511c6778d9378c48279cd9e607"},
		{Key: "vcs.time", Value: "2026-12-03T03:04:46Z"}, {Key: "vcs.modified", Value: "false"}}
	dirty := append(append([]debug.BuildSetting(nil), stamped[:3]...), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
		line []string
	}{
		{"no build info", nil, false, Info{Version: Devel}, []string{"issuer (devel) commit unknown", "go1."}},
		{"devel, not stamped", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			Info{Version: Devel, Go: "go1.26.8"}, []string{"issuer (devel) commit unknown (built without VCS stamping), go1.26.8"}},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261203030446-5c52e87535e9"}, Settings: stamped}, true,
			Info{Version: "v0.0.0-20261203030446-5c52e87535e9", Commit: "5c52e87535e974511c6778d9378c48279cd9e607", CommitTime: "2026-12-03T03:04:46Z", Go: "go1.26.8"},
			[]string{"issuer v0.0.0-20261203030446-5c52e87535e9 commit 5c52e87535e9 (2026-12-03T03:04:46Z), go1.26.8"}},
		{"checkout with local edits", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261203030446-5c52e87535e9+dirty"}, Settings: dirty}, true,
			Info{Version: "v0.0.0-20261203030446-5c52e87535e9+dirty", Commit: "5c52e87535e974511c6778d9378c48279cd9e607", CommitTime: "2026-12-03T03:04:46Z", Modified: true, Go: "go1.26.8"},
			[]string{"commit 5c52e87535e9 with uncommitted changes"}},
		{"release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true,
			Info{Version: "v1.2.0", Go: "go1.26.8"}, []string{"issuer v1.2.0 "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromBuildInfo("issuer", tc.bi, tc.ok)
			want := tc.want
			want.Program, want.Platform = "issuer", got.Platform
			if want.Go == "" {
				want.Go = got.Go
			}
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			for _, l := range tc.line {
				if !strings.Contains(got.String(), l) {
					t.Errorf("%q does not contain %q", got.String(), l)
				}
			}
		})
	}
}

// Setup gives a root command --version, `version [--json]` and the
// completion command.
func TestSetup(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"version", "--json"}, {"completion", "fish"}} {
		root := &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return nil }}
		root.CompletionOptions.DisableDefaultCmd = true // Setup turns it on
		root.AddCommand(&cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}})
		Setup(root)
		var out strings.Builder
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "tool") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}
