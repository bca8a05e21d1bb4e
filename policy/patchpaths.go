package policy

import (
	"path"
	"strings"
)

// What FeaturePatchPaths (receipt format level 15) reads of a patch in
// the apply_patch format: the files it names. A surface without a target
// whose sinks carry such a patch (Codex's apply_patch) writes those
// files, so each is held to the same boundaries a Write's target is: the
// protected paths, boundaries.paths, the lane's workspace and the memory
// paths. The grant still binds no target; only the judgement reads them.

// maxPatchFiles bounds the files one call's patches are read for; a call
// naming more crosses as a whole (boundary:patch_files).
const maxPatchFiles = 256

// patchHeaders are the header lines that name a file, as Codex writes
// them; they are matched without regard to case, after leading blanks.
var patchHeaders = [...]string{"*** add file:", "*** update file:", "*** delete file:", "*** move to:"}

// patchPaths returns the paths a patch names, in order, each once: the
// rest of every header line, trimmed. Text without a header gives none.
func patchPaths(raw string) []string {
	if !strings.Contains(raw, "***") {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(raw, "\n") {
		line = strings.TrimLeft(strings.TrimSuffix(line, "\r"), " \t")
		if len(line) < len("*** move to:") || line[0] != '*' {
			continue
		}
		for _, h := range patchHeaders {
			if len(line) > len(h) && strings.EqualFold(line[:len(h)], h) {
				if p := strings.TrimSpace(line[len(h):]); p != "" && !contains(out, p) {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// addPatchFiles adds to f.patchFiles the files that raw, a string sink
// value of a call on a surface without a target, names: each resolved
// against the working directory or workspace (never the hook's resolved
// target, which is none of them), or cleaned as written when it cannot
// be.
func (f *facts) addPatchFiles(raw string) {
	for _, p := range patchPaths(raw) {
		if len(f.patchFiles) == maxPatchFiles {
			f.patchOverflow = true
			return
		}
		cp, err := canonPath(p, Resolution{Cwd: f.res.Cwd, Workspace: f.res.Workspace})
		if err != nil {
			cp = path.Clean(p)
		}
		if !contains(f.patchFiles, cp) {
			f.patchFiles = append(f.patchFiles, cp)
		}
	}
}
