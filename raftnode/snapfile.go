package raftnode

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/writ-dev/writ/fsm"
)

// SnapshotFormat names the state file format `issuer snapshot` writes:
// one JSON header line, then exactly Size bytes of fsm state snapshot.
const SnapshotFormat = "writ-state-snapshot/1"

// SnapshotHeader describes a state file.
type SnapshotHeader struct {
	Format      string    `json:"format"`
	Node        string    `json:"node"`         // where it was taken
	Index       uint64    `json:"index"`        // raft index the state includes
	Term        uint64    `json:"term"`         // raft term of that index
	Seq         uint64    `json:"seq"`          // last receipt seq in the state
	Published   uint64    `json:"published"`    // receipts confirmed in the stream
	StateDigest string    `json:"state_digest"` // fsm digest (what status reports)
	Size        int       `json:"size"`
	SHA256      string    `json:"sha256"` // of the state bytes
	Taken       time.Time `json:"taken"`
	Source      string    `json:"source"` // "live" (running node) or "raft-snapshot" (data dir)
}

// ErrSnapshotFile: a state file that is not one, or is damaged.
var ErrSnapshotFile = errors.New("raftnode: bad state snapshot file")

// newHeader describes data, checking it restores.
func newHeader(node string, index, term uint64, data []byte, source string) (SnapshotHeader, error) {
	st, err := fsm.Restore(data)
	if err != nil {
		return SnapshotHeader{}, fmt.Errorf("%w: the state does not restore: %v", ErrSnapshotFile, err)
	}
	sum := sha256.Sum256(data)
	stats := st.Stats()
	return SnapshotHeader{
		Format: SnapshotFormat, Node: node, Index: index, Term: term,
		Seq: stats.Seq, Published: stats.Published, StateDigest: st.Digest().String(),
		Size: len(data), SHA256: hex.EncodeToString(sum[:]), Taken: time.Now().UTC(), Source: source,
	}, nil
}

// StateSnapshot returns this node's applied state, encoded, with a header
// naming the raft index and term it includes. It is consistent (frozen
// under the state machine's lock, encoded after it, as the raft snapshot
// is) and includes only applied, hence committed, entries.
func (n *Node) StateSnapshot() (SnapshotHeader, []byte, error) {
	var (
		view    fsm.Frozen
		applied uint64
	)
	n.fsm.view(func(s *fsm.State, a uint64) {
		view = s.Freeze()
		applied = a
	})
	data := view.Encode()
	term := uint64(0)
	if applied > 0 {
		var l raft.Log
		if err := n.logs.GetLog(applied, &l); err == nil {
			term = l.Term
		} else {
			term = n.raft.CurrentTerm()
		}
	}
	h, err := newHeader(n.cfg.NodeID, applied, term, data, "live")
	return h, data, err
}

// WriteSnapshotFile writes a state file.
func WriteSnapshotFile(w io.Writer, h SnapshotHeader, data []byte) error {
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(hb, '\n')); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// ReadSnapshotFile reads and checks a state file: the header, the size,
// the checksum, and that the state restores to the digest the header names.
func ReadSnapshotFile(r io.Reader) (SnapshotHeader, []byte, error) {
	var h SnapshotHeader
	br := bufio.NewReader(r)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return h, nil, fmt.Errorf("%w: no header line: %v", ErrSnapshotFile, err)
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &h); err != nil || h.Format != SnapshotFormat {
		return h, nil, fmt.Errorf("%w: header is not %s (%v)", ErrSnapshotFile, SnapshotFormat, err)
	}
	if h.Size < 0 || h.Size > 1<<32 {
		return h, nil, fmt.Errorf("%w: size %d", ErrSnapshotFile, h.Size)
	}
	data := make([]byte, h.Size)
	if _, err := io.ReadFull(br, data); err != nil {
		return h, nil, fmt.Errorf("%w: state is shorter than its header says (%d bytes): %v", ErrSnapshotFile, h.Size, err)
	}
	if extra, _ := br.Peek(1); len(extra) > 0 {
		return h, nil, fmt.Errorf("%w: trailing bytes after the state", ErrSnapshotFile)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != h.SHA256 {
		return h, nil, fmt.Errorf("%w: checksum mismatch", ErrSnapshotFile)
	}
	st, err := fsm.Restore(data)
	if err != nil {
		return h, nil, fmt.Errorf("%w: the state does not restore: %v", ErrSnapshotFile, err)
	}
	if d := st.Digest().String(); d != h.StateDigest {
		return h, nil, fmt.Errorf("%w: state digest %s, header says %s", ErrSnapshotFile, d, h.StateDigest)
	}
	return h, data, nil
}

// LatestRaftSnapshot reads the newest raft snapshot in a node's raft
// directory (the --data-dir's raft/ subdirectory) as a state file. It only
// reads snapshot files, which raft never changes once written, so it is
// safe on a running node's directory as well as a stopped one's. It holds
// the state as of the snapshot's index, not the node's latest.
func LatestRaftSnapshot(raftDir, node string) (SnapshotHeader, []byte, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 1, hclog.NewNullLogger())
	if err != nil {
		return SnapshotHeader{}, nil, err
	}
	metas, err := snaps.List()
	if err != nil {
		return SnapshotHeader{}, nil, err
	}
	if len(metas) == 0 {
		return SnapshotHeader{}, nil, fmt.Errorf("raftnode: %s holds no raft snapshot yet (take one on the running node with `issuer snapshot save`)", raftDir)
	}
	meta, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		return SnapshotHeader{}, nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return SnapshotHeader{}, nil, err
	}
	h, err := newHeader(node, meta.Index, meta.Term, data, "raft-snapshot")
	return h, data, err
}

// RestoreOptions direct RestoreDataDir.
type RestoreOptions struct {
	// Peers is the membership the restored node starts with: every member
	// of the (new) cluster, each restored from the same file.
	Peers []Peer
	// Force allows restoring over existing raft state: the old raft
	// directory is moved aside (never deleted), and the votes it recorded
	// are carried over so the node cannot vote twice in a term.
	Force bool
}

// RestoreDataDir writes a state file into a stopped node's raft directory
// as a raft snapshot, with the given membership, so that `issuer serve`
// starts from it. It refuses a directory that holds raft state unless
// Force is set. It returns where the old state was moved, if anywhere.
func RestoreDataDir(raftDir string, h SnapshotHeader, data []byte, o RestoreOptions) (string, error) {
	if len(o.Peers) == 0 {
		return "", fmt.Errorf("%w: restore needs the full membership (--peers)", ErrMembership)
	}
	seen := map[string]bool{}
	var servers []raft.Server
	for _, p := range o.Peers {
		if p.ID == "" || seen[p.ID] {
			return "", fmt.Errorf("%w: bad or duplicate peer id %q", ErrMembership, p.ID)
		}
		seen[p.ID] = true
		servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: raft.Voter})
	}
	var moved string
	var oldTerm, oldVoteTerm uint64
	var oldVoteCand []byte
	dbPath := filepath.Join(raftDir, "raft.db")
	if _, err := os.Stat(dbPath); err == nil {
		if !o.Force {
			return "", fmt.Errorf("raftnode: %s already holds raft state; restoring over a member's state rolls its authority back "+
				"(see `issuer snapshot restore --help`); pass --force to move it aside", raftDir)
		}
		old, err := raftboltdb.New(raftboltdb.Options{Path: dbPath})
		if err != nil {
			return "", fmt.Errorf("raftnode: opening the old state (is the node still running?): %w", err)
		}
		oldTerm, _ = old.GetUint64([]byte("CurrentTerm"))
		oldVoteTerm, _ = old.GetUint64([]byte("LastVoteTerm"))
		oldVoteCand, _ = old.Get([]byte("LastVoteCand"))
		old.Close()
		moved = fmt.Sprintf("%s.before-restore-%s", raftDir, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(raftDir, moved); err != nil {
			return "", err
		}
	} else if entries, _ := os.ReadDir(filepath.Join(raftDir, "snapshots")); len(entries) > 0 && !o.Force {
		return "", fmt.Errorf("raftnode: %s already holds raft snapshots; pass --force to move them aside", raftDir)
	}
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return moved, err
	}
	store, err := raftboltdb.New(boltOptions(dbPath))
	if err != nil {
		return moved, err
	}
	defer store.Close()
	// The term never goes back, and a vote cast in the old state stays cast.
	term := max(h.Term, oldTerm)
	if err := store.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return moved, err
	}
	if oldVoteTerm > 0 {
		_ = store.SetUint64([]byte("LastVoteTerm"), oldVoteTerm)
		_ = store.Set([]byte("LastVoteCand"), oldVoteCand)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hclog.NewNullLogger())
	if err != nil {
		return moved, err
	}
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	index := max(h.Index, 1)
	sink, err := snaps.Create(1, index, max(h.Term, 1), raft.Configuration{Servers: servers}, index, trans)
	if err != nil {
		return moved, err
	}
	if _, err := sink.Write(data); err != nil {
		_ = sink.Cancel()
		return moved, err
	}
	return moved, sink.Close()
}
