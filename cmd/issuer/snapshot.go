package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

func snapshotCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "save a node's state to a file, or restore a stopped node's data dir from one",
		Long: `A state file is one JSON header line (format, node, raft index and term,
receipt seq, state digest, size, sha256) followed by the state machine's
own snapshot encoding. Every read checks the checksum and that the state
restores to the digest the header names.

  issuer snapshot save --out FILE [--node ID] [--compact]   from a running node, over NATS
  issuer snapshot save --out FILE --data-dir DIR            the newest raft snapshot in a data dir
  issuer snapshot restore --in FILE --data-dir DIR --node-id ID --peers id=host:port,...
  issuer snapshot inspect FILE

See 'issuer snapshot restore --help' for when restoring is safe.`,
	}
	cmd.AddCommand(snapshotSaveCmd(stdout), snapshotRestoreCmd(stdout), snapshotInspectCmd(stdout))
	return cmd
}

func snapshotSaveCmd(stdout io.Writer) *cobra.Command {
	var (
		o       connect.Options
		out     string
		node    string
		dataDir string
		compact bool
	)
	cmd := &cobra.Command{
		Use:   "save --out FILE [--node ID | --data-dir DIR]",
		Short: "write a node's state to a file",
		Long: `Online (the default): ask a running node over NATS (--node ID, default the
leader) for its applied state. The state includes exactly the entries the
node has applied, all of them committed; --compact also makes the node take
a raft snapshot first, compacting its log. Needs an operator's credentials.

Offline (--data-dir DIR, the node's --data-dir): copy the newest raft
snapshot out of the data dir. It holds the state as of that snapshot, not
the latest entries; reading snapshot files is safe while the node runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{fmt.Errorf("--out FILE is required")}
			}
			var (
				h    raftnode.SnapshotHeader
				data []byte
				err  error
			)
			if dataDir != "" {
				h, data, err = raftnode.LatestRaftSnapshot(filepath.Join(dataDir, "raft"), node)
				if err != nil {
					return err
				}
			} else {
				h, data, err = fetchSnapshot(cmd.Context(), &o, node, compact)
				if err != nil {
					return err
				}
			}
			if err := writeFileAtomic(out, h, data); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "saved %s: node %s, raft index %d term %d, seq %d, state digest %s, %d bytes (%s)\n",
				out, h.Node, h.Index, h.Term, h.Seq, h.StateDigest, h.Size, h.Source)
			return nil
		},
	}
	addConnFlags(cmd, &o)
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "file to write")
	f.StringVar(&node, "node", "", "node id to ask (default: the leader)")
	f.StringVar(&dataDir, "data-dir", "", "read the newest raft snapshot from this node data dir instead of asking over NATS")
	f.BoolVar(&compact, "compact", false, "online: also take a raft snapshot on the node first")
	return cmd
}

// fetchSnapshot asks a node (or the leader) for its state over NATS.
func fetchSnapshot(ctx context.Context, o *connect.Options, node string, compact bool) (raftnode.SnapshotHeader, []byte, error) {
	var h raftnode.SnapshotHeader
	c, cctx, done, err := operatorClient(ctx, o)
	if err != nil {
		return h, nil, err
	}
	defer done()
	if node == "" {
		st, err := c.Status(cctx)
		if err != nil {
			return h, nil, o.NoAnswer(err)
		}
		node = st.Node
	}
	inbox := c.NC.NewRespInbox()
	sub, err := c.NC.SubscribeSync(inbox)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", connect.ErrConnect, err)
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(issuer.SnapshotRequest{V: api.Version, Compact: compact})
	if err := c.NC.PublishRequest(issuer.SubjectSnapshot+"."+node, inbox, body); err != nil {
		return h, nil, fmt.Errorf("%w: %v", connect.ErrConnect, err)
	}
	next := func() (*nats.Msg, error) {
		m, err := sub.NextMsgWithContext(cctx)
		if err != nil {
			return nil, fmt.Errorf("node %s did not send its snapshot: %w", node, o.NoAnswer(err))
		}
		return m, nil
	}
	m, err := next()
	if err != nil {
		return h, nil, err
	}
	var rep issuer.SnapshotReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return h, nil, fmt.Errorf("node %s answered %q: %v", node, m.Data, err)
	}
	if rep.Error != "" {
		return h, nil, refusedError{fmt.Sprintf("node %s: %s", node, rep.Error)}
	}
	data := make([]byte, 0, rep.Header.Size)
	for range rep.Chunks {
		m, err := next()
		if err != nil {
			return h, nil, err
		}
		data = append(data, m.Data...)
	}
	// Check it as a reader of the file would.
	var buf strings.Builder
	_ = raftnode.WriteSnapshotFile(&buf, rep.Header, data)
	h, data, err = raftnode.ReadSnapshotFile(strings.NewReader(buf.String()))
	if err != nil {
		return h, nil, fmt.Errorf("snapshot from node %s: %w", node, err)
	}
	return h, data, nil
}

func writeFileAtomic(path string, h raftnode.SnapshotHeader, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := raftnode.WriteSnapshotFile(f, h, data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readStateFile(path string) (raftnode.SnapshotHeader, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return raftnode.SnapshotHeader{}, nil, usageError{err}
	}
	defer f.Close()
	return raftnode.ReadSnapshotFile(f)
}

func snapshotRestoreCmd(stdout io.Writer) *cobra.Command {
	var (
		in      string
		dataDir string
		nodeID  string
		peers   string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "restore --in FILE --data-dir DIR --node-id ID --peers id=host:port,...",
		Short: "make a stopped node's data dir start from a state file",
		Long: `Write the state file into DIR/raft as a raft snapshot with the given
membership; 'issuer serve' on that data dir then starts from it. The node
must be stopped. A data dir that already holds raft state is refused
unless --force, which moves the old raft directory aside (never deletes
it) and keeps the votes it recorded.

When it is safe:
  * A fresh cluster (every raft disk lost, or a new cluster from a backup):
    stop every node, restore the SAME file into every node's data dir with
    the SAME --peers, then start them. They agree on the state and elect a
    leader as usual.
  * Before workers come back, apply a policy (issuer policy apply): the
    epoch bump refuses every grant minted before the snapshot that a
    worker still holds. Anything spent after the snapshot was taken is
    unspent again in the restored state, and only the epoch bump stops it
    from being spent a second time. Idempotency records after the
    snapshot are gone too.
  * The receipt stream is not in the state file. A restored cluster
    publishes receipts after the snapshot's confirmed watermark only if
    the stream holds everything up to it: keep the existing stream (same
    NATS cluster, or restore it with 'nats stream restore'). Otherwise
    status reports stream_lost_from/through and publication waits:
    nothing is published out of order.

When it is not:
  * Restoring one member of a running cluster is never needed (a lagging
    or wiped member catches up from the leader by itself) and restoring a
    majority of a running cluster from an older file rolls committed
    authority back. Do not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in == "" || dataDir == "" || nodeID == "" || peers == "" {
				return usageError{fmt.Errorf("--in, --data-dir, --node-id and --peers are all required")}
			}
			ps, err := parsePeers(peers)
			if err != nil {
				return usageError{err}
			}
			self := false
			for _, p := range ps {
				self = self || p.ID == nodeID
			}
			if !self {
				return usageError{fmt.Errorf("--peers must include this node (%q)", nodeID)}
			}
			h, data, err := readStateFile(in)
			if err != nil {
				return err
			}
			// A running node holds the lock: restoring under it would
			// rewrite a live raft log.
			unlock, err := lockDataDir(dataDir)
			if err != nil {
				return err
			}
			defer unlock()
			moved, err := raftnode.RestoreDataDir(filepath.Join(dataDir, "raft"), h, data, raftnode.RestoreOptions{Peers: ps, Force: force})
			if err != nil {
				return err
			}
			if moved != "" {
				fmt.Fprintf(stdout, "moved the old raft state aside to %s\n", moved)
			}
			fmt.Fprintf(stdout, "restored %s into %s: raft index %d term %d, seq %d, state digest %s, members %s\n",
				in, dataDir, h.Index, h.Term, h.Seq, h.StateDigest, peers)
			fmt.Fprintln(stdout, "next: start every member, then `issuer policy apply` before workers return (see --help)")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "state file written by `issuer snapshot save`")
	f.StringVar(&dataDir, "data-dir", "", "the stopped node's --data-dir")
	f.StringVar(&nodeID, "node-id", "", "the node's id")
	f.StringVar(&peers, "peers", "", "every member as id=host:port,... (this node included)")
	f.BoolVar(&force, "force", false, "move existing raft state aside instead of refusing")
	return cmd
}

func snapshotInspectCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "check a state file and print its header",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, _, err := readStateFile(args[0])
			if err != nil {
				return err
			}
			b, _ := json.MarshalIndent(h, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return nil
		},
	}
}
