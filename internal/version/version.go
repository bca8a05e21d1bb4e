// Package version reports what a writ binary was built from (the module
// version and the VCS commit that `go build` stamps into a binary built
// in a git checkout) and gives every writ command the same --version flag
// and `version` subcommand.
package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Devel is the module version of a build with no version stamped, as the
// go command reports it.
const Devel = "(devel)"

// Info is what a binary knows about its build. Its JSON form is a stable
// output of `version --json`.
type Info struct {
	Program string `json:"program"`
	// Version is the main module's version: a release tag, a
	// pseudo-version derived from the commit (go build in a git
	// checkout, "+dirty" with local changes), or "(devel)".
	Version string `json:"version"`
	// Commit is the full VCS revision, empty when the build was not
	// stamped (go build -buildvcs=false, go run, a test binary).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time (RFC 3339), when stamped.
	CommitTime string `json:"commit_time,omitempty"`
	// Modified reports uncommitted changes in the checkout at build time.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get returns the running binary's build information.
func Get(program string) Info {
	bi, ok := debug.ReadBuildInfo()
	return FromBuildInfo(program, bi, ok)
}

// FromBuildInfo builds an Info from what debug.ReadBuildInfo returned.
func FromBuildInfo(program string, bi *debug.BuildInfo, ok bool) Info {
	in := Info{Program: program, Version: Devel, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return in
	}
	if v := bi.Main.Version; v != "" {
		in.Version = v
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form --version prints, e.g.
//
//	issuer v0.0.0-20261203100000-5c52e87a1b2c commit 5c52e87a1b2c (2026-12-03T10:00:00Z), go1.26.8 linux/amd64
//	issuer (devel) commit unknown (built without VCS stamping), go1.26.8 linux/amd64
func (in Info) String() string {
	s := in.Program + " " + in.Version
	switch {
	case in.Commit == "":
		s += " commit unknown (built without VCS stamping)"
	default:
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " commit " + c
		if in.Modified {
			s += " with uncommitted changes"
		}
		if in.CommitTime != "" {
			s += " (" + in.CommitTime + ")"
		}
	}
	return s + ", " + in.Go + " " + in.Platform
}

// Setup gives root a --version flag and a `version [--json]` subcommand,
// both printing Get(root.Name()) on stdout, and turns on cobra's
// `completion` command (bash, zsh, fish, powershell).
func Setup(root *cobra.Command) {
	in := Get(root.Name())
	root.Version = in.String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = false
	root.CompletionOptions.HiddenDefaultCmd = false
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "print the version and the commit this binary was built from",
		Long: `Print the module version, the VCS commit this binary was built from (go
build stamps it when building in a git checkout; "with uncommitted changes"
when the checkout had local edits), the Go version and the platform.
--version prints the same line; --json prints it as one JSON object:
{"program","version","commit","commit_time","modified","go","platform"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !asJSON {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), in.String())
				return err
			}
			b, err := json.Marshal(in)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	root.AddCommand(cmd)
}

// CompletionHelp is the paragraph each command's help gives on shell
// completion; %[1]s is the program name.
const CompletionHelp = `Shell completion: %[1]s completion bash|zsh|fish|powershell prints a
script; e.g. source <(%[1]s completion bash), or see '%[1]s completion --help'.`

// CompletionText is CompletionHelp for program.
func CompletionText(program string) string { return fmt.Sprintf(CompletionHelp, program) }
