package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/provenance"
)

// Checkpoints carry a session's context across a crash or a move, never
// its authority. A bundle holds the task text, artifact paths with their
// SHA-256, the review references that were pending, the canonical targets
// the session had resolved, the provenance registry's descriptors and, as
// history, the grant ids the session had been given. Nothing in it is
// spendable: restoring it starts a new incarnation of the worker at the
// issuer, which refuses every grant of the old one at spend
// (grant_revoked, naming the incarnation), and everything read back from
// the bundle is reported as history to be re-established: artifacts are
// hashed again, targets are re-resolved by the issuer at the next request,
// and reviews bind only as the issuer holds them then.

// CheckpointVersion is the bundle format this build writes and reads.
const CheckpointVersion = 1

// CheckpointKind marks a file as a writ checkpoint.
const CheckpointKind = "writ.checkpoint"

// Bundle bounds: a checkpoint is context, not an archive.
const (
	MaxCheckpointBytes = 4 << 20
	MaxCheckpointItems = 4096
	MaxTaskBytes       = 256 << 10
)

// ErrBadCheckpoint is returned for a file that is not a checkpoint this
// build reads: another format or version, unknown fields, oversize, or
// entries that do not validate.
var ErrBadCheckpoint = errors.New("worker: bad checkpoint")

// Checkpoint is a saved session's context.
type Checkpoint struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Worker and Lane are the identity and lane the session ran as; a
	// bundle restores into the same worker only.
	Worker  string `json:"worker"`
	Lane    string `json:"lane,omitempty"`
	Session string `json:"session,omitempty"`
	SavedAt string `json:"saved_at"` // RFC 3339, the saver's clock
	Task    string `json:"task,omitempty"`
	// Artifacts are files the session produced or relied on.
	Artifacts []CheckpointArtifact `json:"artifacts,omitempty"`
	// Reviews are the review references (ids, captions or keep tokens)
	// that were pending: history, rebound from the issuer on restore.
	Reviews []string `json:"reviews,omitempty"`
	// Targets are canonical targets the session had resolved: history,
	// never bound by a grant without the issuer resolving them again.
	Targets []string `json:"targets,omitempty"`
	// Staged are outbound messages the session had prepared: a
	// destination and the SHA-256 of the body. Sending one again needs a
	// fresh grant for the call.
	Staged []CheckpointStaged `json:"staged,omitempty"`
	// Sources are the provenance registry's descriptors (no content).
	Sources []provenance.Descriptor `json:"sources,omitempty"`
	// History lists grant ids the old incarnation was given: kept so a
	// reader can see what is dead, refused at spend after a restore.
	History []string `json:"history_grants,omitempty"`
}

// CheckpointArtifact is one file and its SHA-256 (hex) when saved.
type CheckpointArtifact struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// CheckpointStaged is one prepared outbound message.
type CheckpointStaged struct {
	Tool        string `json:"tool"`
	Destination string `json:"destination"`
	BodySHA256  string `json:"body_sha256,omitempty"`
}

// CheckpointInput is what a save collects.
type CheckpointInput struct {
	Worker, Lane, Session, Task string
	Artifacts                   []string // paths; hashed now
	Reviews, Targets, Grants    []string
	Staged                      []CheckpointStaged
	// StateDir and Session locate the provenance registry (optional).
	StateDir string
	Now      time.Time
}

// BuildCheckpoint assembles a bundle: it hashes the artifacts, reads the
// session's provenance descriptors (none when there is no registry) and
// validates every entry.
func BuildCheckpoint(ctx context.Context, in CheckpointInput) (*Checkpoint, error) {
	cp := &Checkpoint{
		Kind: CheckpointKind, Version: CheckpointVersion, Worker: in.Worker, Lane: in.Lane,
		Session: in.Session, SavedAt: in.Now.UTC().Format(time.RFC3339), Task: in.Task,
		Reviews: in.Reviews, Targets: in.Targets, Staged: in.Staged, History: in.Grants,
	}
	for _, p := range in.Artifacts {
		sum, err := fileSum(p)
		if err != nil {
			return nil, fmt.Errorf("artifact %s: %w", p, err)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("artifact %s: %w", p, err)
		}
		cp.Artifacts = append(cp.Artifacts, CheckpointArtifact{Path: abs, SHA256: sum})
	}
	if in.StateDir != "" && in.Session != "" {
		reg, err := newSessionStore(in.StateDir, in.Session, 0).load(ctx)
		if err != nil {
			return nil, fmt.Errorf("provenance registry: %w", err)
		}
		if reg != nil {
			_, per := reg.Bytes()
			ids := make([]string, 0, len(per))
			for id := range per {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if d, ok := reg.Source(id); ok {
					cp.Sources = append(cp.Sources, d)
				}
			}
		}
	}
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	return cp, nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Validate checks a bundle: its kind and version, the worker id, and
// every entry's form and count.
func (cp *Checkpoint) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadCheckpoint, fmt.Sprintf(format, a...))
	}
	switch {
	case cp.Kind != CheckpointKind:
		return bad("kind %q (want %q)", cp.Kind, CheckpointKind)
	case cp.Version != CheckpointVersion:
		return bad("version %d (this build reads %d)", cp.Version, CheckpointVersion)
	case api.ValidID(cp.Worker) != nil:
		return bad("worker %q is not a worker id", cp.Worker)
	case cp.Lane != "" && api.ValidID(cp.Lane) != nil:
		return bad("lane %q is not a lane id", cp.Lane)
	case len(cp.Task) > MaxTaskBytes || !utf8.ValidString(cp.Task):
		return bad("task is over %d bytes or not UTF-8", MaxTaskBytes)
	}
	if _, err := time.Parse(time.RFC3339, cp.SavedAt); err != nil {
		return bad("saved_at %q is not RFC 3339", cp.SavedAt)
	}
	n := len(cp.Artifacts) + len(cp.Reviews) + len(cp.Targets) + len(cp.Staged) + len(cp.Sources) + len(cp.History)
	if n > MaxCheckpointItems {
		return bad("%d entries (at most %d)", n, MaxCheckpointItems)
	}
	for _, a := range cp.Artifacts {
		if !filepath.IsAbs(a.Path) || !isHexSum(a.SHA256) {
			return bad("artifact %q: want an absolute path and 64 hex digits", a.Path)
		}
	}
	for _, s := range cp.Staged {
		if s.Tool == "" || s.Destination == "" || (s.BodySHA256 != "" && !isHexSum(s.BodySHA256)) {
			return bad("staged message to %q: want a tool, a destination and the body's SHA-256", s.Destination)
		}
	}
	for _, l := range [][]string{cp.Reviews, cp.Targets, cp.History} {
		for _, v := range l {
			if v == "" || len(v) > 4096 || !utf8.ValidString(v) {
				return bad("an entry is empty, over 4096 bytes or not UTF-8")
			}
		}
	}
	return nil
}

func isHexSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// WriteCheckpoint writes the bundle to path (0600, replaced atomically).
func WriteCheckpoint(path string, cp *Checkpoint) error {
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadCheckpoint reads and validates a bundle: strictly (unknown fields,
// trailing data and oversize files are refused).
func ReadCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCheckpointBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseCheckpoint(b)
}

// ParseCheckpoint decodes and validates a bundle.
func ParseCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) > MaxCheckpointBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadCheckpoint, MaxCheckpointBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var cp Checkpoint
	if err := d.Decode(&cp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: data after the bundle", ErrBadCheckpoint)
	}
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	return &cp, nil
}

// RestoredArtifact is one artifact as found on restore.
type RestoredArtifact struct {
	Path  string `json:"path"`
	State string `json:"state"` // "unchanged", "changed" or "missing"
}

// Restored is what a restore reports: the new incarnation and every item
// of the bundle as history, with what must happen before it counts again.
type Restored struct {
	Worker      string             `json:"worker"`
	Incarnation uint64             `json:"incarnation"`
	Task        string             `json:"task,omitempty"`
	Artifacts   []RestoredArtifact `json:"artifacts,omitempty"`
	// Each of these is history; Next says what re-establishes it.
	Reviews    []string           `json:"reviews,omitempty"`
	Targets    []string           `json:"targets,omitempty"`
	Staged     []CheckpointStaged `json:"staged,omitempty"`
	Sources    int                `json:"sources"`
	DeadGrants []string           `json:"dead_grants,omitempty"`
	Next       []string           `json:"next"`
}

// Restore reports a bundle after the issuer started a new incarnation:
// artifacts are hashed again, everything else is history.
func (cp *Checkpoint) Restore(incarnation uint64) Restored {
	r := Restored{
		Worker: cp.Worker, Incarnation: incarnation, Task: cp.Task, Reviews: cp.Reviews,
		Targets: cp.Targets, Staged: cp.Staged, Sources: len(cp.Sources), DeadGrants: cp.History,
	}
	for _, a := range cp.Artifacts {
		state := "unchanged"
		if sum, err := fileSum(a.Path); err != nil {
			state = "missing"
		} else if sum != a.SHA256 {
			state = "changed"
		}
		r.Artifacts = append(r.Artifacts, RestoredArtifact{Path: a.Path, State: state})
	}
	r.Next = []string{
		"nothing from the bundle is spendable: request a fresh grant for every call",
	}
	if len(cp.History) > 0 {
		r.Next = append(r.Next, fmt.Sprintf("the %d grant ids of the old incarnation are refused at spend (grant_revoked)", len(cp.History)))
	}
	if len(cp.Targets) > 0 {
		r.Next = append(r.Next, "cached targets are re-resolved by the issuer at the next request; none is bound from the bundle")
	}
	if len(cp.Reviews) > 0 {
		r.Next = append(r.Next, "review references bind only as the issuer holds them now (a consumed or expired review binds nothing): ask an operator ('issuer reviews')")
	}
	if len(cp.Staged) > 0 {
		r.Next = append(r.Next, "staged messages are not sent: each send needs a fresh grant, judged against the destination as it is now")
	}
	for _, a := range r.Artifacts {
		if a.State != "unchanged" {
			r.Next = append(r.Next, "artifact "+a.Path+" is "+a.State+": re-render it before asking for its review")
		}
	}
	if len(cp.Sources) > 0 {
		r.Next = append(r.Next, "provenance descriptors are history: content enters the new session's registry again as it is read")
	}
	return r
}
