package policy

import "strings"

// OutsideWorkspace explains a workspace crossing for the answer a worker
// reads: when target (a canonical "path:" target) lies outside the
// workspace of lane for worker, it returns "<path> is outside the
// workspace <dir>"; otherwise "". It reads the policy only, so it is as
// deterministic as Judge; it is not part of any receipt.
func (p *Policy) OutsideWorkspace(worker, lane, target string) string {
	if p == nil || p.c == nil {
		return ""
	}
	l := p.c.lanes[lane]
	path, ok := strings.CutPrefix(target, CanonPath+":")
	if l == nil || !ok {
		return ""
	}
	ws := workspaceOf(l.workspace, worker)
	if ws == "" || within(path, ws) {
		return ""
	}
	return path + " is outside the workspace " + ws
}
