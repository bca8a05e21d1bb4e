package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/policy/policyfile"
	"github.com/writ-dev/writ/raftnode"
)

type serveFlags struct {
	dev          bool
	insecure     bool
	nodeID       string
	dataDir      string
	raftAddr     string
	raftAdv      string
	raftLogStore string
	walSegmentMB int
	peers        string
	natsURL      string
	natsHost     string
	natsPort     int
	natsAdv      string
	clusterPort  int
	routes       string
	authFile     string
	operatorDir  string
	reviewers    string
	policyFile   string
	logLevel     string
	logFormat    string
	replicas     int
	format       uint64
	refusalRate  float64
	refusalBurst int
	linger       time.Duration
	digestShare  float64
	metricsAddr  string
	sec          secFlags
}

func serveCmd(stdout, stderr io.Writer) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run an issuer node",
		Long: `Run one issuer node: a raft member with a boltdb log (fsync on every
append) and, unless --nats-url is given, an embedded NATS server with
JetStream (file store, fsync on every write).

Development (one node, no credentials, NATS on 127.0.0.1:4222):
  issuer serve --dev

A three-node cluster on one machine:
  issuer serve --node-id n1 --data-dir d1 --raft-addr 127.0.0.1:7001 \
    --nats-port 4222 --cluster-port 6222 \
    --peers n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003 \
    --routes nats-route://127.0.0.1:6222,nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224 \
    --auth auth.json
  (and the same for n2, n3 with their own ports and data dirs)

--auth names a JSON file of NATS users:
  {"users":[{"name":"w1","role":"worker","password_file":"w1.pw"},
            {"name":"ops","role":"operator","password_file":"ops.pw"},
            {"name":"audit","role":"auditor","password_file":"audit.pw"},
            {"name":"dana","role":"reviewer","password_file":"dana.pw",
             "roles":["finance"]}]}
A worker may publish only under writ.api.<name>.>, so it can neither ask
nor spend in another's name. A reviewer may publish only under
writ.review.<name>.>: it decides reviews (issuer review approve|reject|
reply as that user) that ask for one of its roles or for none, and
nothing else (see docs/reviews.md). Without --auth a non-dev node refuses to
start unless --insecure-no-auth is given.

--nats-operator-dir DIR runs the embedded NATS servers in operator mode
instead of --auth: keys and JWTs from 'issuer auth init --dir DIR', clients
connect with .creds files from 'issuer auth mint' (--nats-creds), and
'issuer auth revoke' revokes them on every server. The account resolver
keeps its JWTs in DATA-DIR/nats-accounts. --reviewers FILE names the
reviewer identities and their roles, as the auth file does with passwords:
  {"reviewers":[{"name":"dana","roles":["finance"]}]}
See docs/operator-mode.md.

A running node holds an exclusive lock on its --data-dir (the file
writ.lock in it): a second node started on the same dir fails before it
opens anything, naming the dir. The operating system releases the lock
when the process exits, however it exits.

Every log line, raft's and the embedded NATS server's included, goes to
stderr in one format: --log-format text (key=value) or json (one object
per line, for a log shipper).

--metrics-listen ADDR (off by default) serves Prometheus metrics at
http://ADDR/metrics: requests by operation, grant decisions by decision,
lane and consequence class, refusals by reason, commit and spend latency
histograms, raft state, outbox depth, stream lag and the time raft
spends in each stage of a commit (the leader's log append, the
AppendEntries round trip, a follower's append, commit, state machine
apply: writ_raft_stage_seconds), each labelled with
this node's id and never with worker ids, targets or tokens. Listen on
loopback (--metrics-listen 127.0.0.1:9464) unless a scraper on another
host must reach it; the endpoint has no authentication.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.dev, "dev", false, "single-node development issuer without credentials")
	fl.BoolVar(&f.insecure, "insecure-no-auth", false, "run a non-dev node without NATS credentials (never in production)")
	fl.StringVar(&f.nodeID, "node-id", "", "this node's raft id (dev: \"dev\")")
	fl.StringVar(&f.dataDir, "data-dir", "", "where the raft log, snapshots and JetStream store live (dev: ./writ-data)")
	fl.StringVar(&f.raftAddr, "raft-addr", "", "host:port for the raft transport (dev: 127.0.0.1:7000)")
	fl.StringVar(&f.raftAdv, "raft-advertise", "", "host:port peers dial, when different from --raft-addr")
	fl.StringVar(&f.raftLogStore, "raft-log-store", raftnode.LogStoreWAL,
		"where the raft log lives: wal (raft-wal, one fsync per append) or boltdb (raft.db, as data dirs before the WAL); a data dir holding the other one is moved across once at start")
	fl.IntVar(&f.walSegmentMB, "raft-wal-segment-mb", raftnode.DefaultWALSegmentSize>>20,
		"size of each raft-wal segment file in MiB (1-1024), preallocated when created")
	fl.StringVar(&f.peers, "peers", "", "initial members as id=host:port,... (this node included); used only to bootstrap")
	fl.StringVar(&f.natsURL, "nats-url", "", "use this NATS cluster instead of an embedded server")
	fl.StringVar(&f.natsHost, "nats-host", "127.0.0.1", "embedded NATS client listen host")
	fl.IntVar(&f.natsPort, "nats-port", 4222, "embedded NATS client port")
	fl.StringVar(&f.natsAdv, "nats-advertise", "",
		"client URL of the embedded NATS server that status reports and, on the leader, answers carry so clients can enter at the leader's server; default its listen address (none when --nats-host is 0.0.0.0 or ::), \"off\" for none")
	fl.IntVar(&f.clusterPort, "cluster-port", 0, "embedded NATS route port (enables the NATS cluster)")
	fl.StringVar(&f.routes, "routes", "", "NATS route URLs of the cluster, comma separated")
	fl.StringVar(&f.authFile, "auth", "", "JSON file of NATS users (see above)")
	fl.StringVar(&f.reviewers, "reviewers", "", "with --nats-operator-dir: JSON file of reviewer identities and their roles, {\"reviewers\":[{\"name\":\"dana\",\"roles\":[\"finance\"]}]}")
	fl.StringVar(&f.operatorDir, "nats-operator-dir", "", "run NATS in operator mode with the keys of this directory (from issuer auth init), instead of --auth")
	fl.StringVar(&f.policyFile, "policy", "", "policy document applied when the log has none (default: built-in)")
	fl.StringVar(&f.logLevel, "log-level", "info", "error, warn, info or debug")
	fl.StringVar(&f.metricsAddr, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty; e.g. 127.0.0.1:9464)")
	fl.StringVar(&f.logFormat, "log-format", "text", "text (key=value lines) or json (one object per line); raft's and NATS's lines too")
	fl.IntVar(&f.replicas, "stream-replicas", 0, "receipt stream replicas (default: 1 for one peer, 3 otherwise)")
	fl.Uint64Var(&f.format, "receipt-format", 0, "highest receipt format level this node reports and, leading, raises the cluster to (default: its build's); 1 holds the cluster at the legacy receipt form")
	fl.Float64Var(&f.refusalRate, "refusal-rate", issuer.DefaultRefusalRate, "refusals per second a worker may cause before the leader answers its requests rate_limited, counted in one refusal summary per second; 0 turns admission control off")
	fl.IntVar(&f.refusalBurst, "refusal-burst", issuer.DefaultRefusalBurst, "refusals in a row a worker may cause before -refusal-rate applies")
	fl.DurationVar(&f.linger, "publish-linger", issuer.DefaultPublishLinger,
		"how long a partial round of receipts waits for company before it is published (0: at once, at most 1s); answers never wait for it, only the stream's lag does")
	fl.Float64Var(&f.digestShare, "status-digest-share", issuer.DefaultStatusDigestShare,
		"share of one core status requests may spend computing the state digest (at most 1; 0: the default); past it a status waits its turn, up to 1s, and still answers fresh; 1 never waits")
	addSecFlags(fl, &f.sec)
	return cmd
}

func (f *serveFlags) applyDev() {
	if !f.dev {
		return
	}
	if f.nodeID == "" {
		f.nodeID = "dev"
	}
	if f.dataDir == "" {
		f.dataDir = "writ-data"
	}
	if f.raftAddr == "" {
		f.raftAddr = "127.0.0.1:7000"
	}
}

func parsePeers(s string) ([]raftnode.Peer, error) {
	var out []raftnode.Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(id) == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", item)
		}
		id, addr = strings.TrimSpace(id), strings.TrimSpace(addr)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: %q: address %q is not host:port", item, addr)
		}
		for _, p := range out {
			if p.ID == id {
				return nil, fmt.Errorf("--peers: node id %q is listed twice", id)
			}
		}
		out = append(out, raftnode.Peer{ID: id, Addr: addr})
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// authFile is the --auth document.
type authFile struct {
	Users []struct {
		Name         string   `json:"name"`
		Role         string   `json:"role"`
		PasswordFile string   `json:"password_file"`
		Roles        []string `json:"roles,omitempty"` // a reviewer's reviewer roles
	} `json:"users"`
}

// loadUsers reads the --auth document: the NATS users, and the reviewer
// identities with the reviewer roles each holds.
func loadUsers(path string) ([]natsbus.User, map[string][]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--auth: %w", err)
	}
	var af authFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&af); err != nil {
		return nil, nil, fmt.Errorf("--auth %s: %w", path, err)
	}
	var users []natsbus.User
	var reviewers map[string][]string
	for i, u := range af.Users {
		pwPath := u.PasswordFile
		if !filepath.IsAbs(pwPath) {
			pwPath = filepath.Join(filepath.Dir(path), pwPath)
		}
		pw, err := os.ReadFile(pwPath)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth %s: users[%d].password_file: %w", path, i, err)
		}
		p := strings.TrimSpace(string(pw))
		switch u.Role {
		case "worker":
			users = append(users, natsbus.WorkerUser(u.Name, p))
		case "operator":
			users = append(users, natsbus.OperatorUser(u.Name, p))
		case "auditor":
			users = append(users, natsbus.AuditorUser(u.Name, p))
		case "issuer":
			users = append(users, natsbus.IssuerUser(u.Name, p))
		case "reviewer":
			users = append(users, natsbus.ReviewerUser(u.Name, p))
			if reviewers == nil {
				reviewers = map[string][]string{}
			}
			reviewers[u.Name] = append([]string{}, u.Roles...)
		default:
			return nil, nil, fmt.Errorf("--auth %s: users[%d].role: %q is not worker, operator, reviewer, auditor or issuer", path, i, u.Role)
		}
		if len(u.Roles) > 0 && u.Role != "reviewer" {
			return nil, nil, fmt.Errorf("--auth %s: users[%d].roles: only a reviewer holds reviewer roles", path, i)
		}
	}
	return users, reviewers, nil
}

func randomSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	f.applyDev()
	level := slog.LevelInfo
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	var base slog.Handler
	switch hopts := (&slog.HandlerOptions{Level: level}); f.logFormat {
	case "text":
		base = slog.NewTextHandler(stderr, hopts)
	case "json":
		base = slog.NewJSONHandler(stderr, hopts)
	default:
		return usageError{fmt.Errorf("--log-format: %q is not text or json", f.logFormat)}
	}
	rh := newRaftContext(base)
	lg := slog.New(rh).With("node", f.nodeID)

	peers, err := parsePeers(f.peers)
	if err != nil {
		return usageError{err}
	}
	if len(peers) == 0 && f.raftAddr != "" && f.nodeID != "" {
		adv := f.raftAdv
		if adv == "" {
			adv = f.raftAddr
		}
		peers = []raftnode.Peer{{ID: f.nodeID, Addr: adv}}
	}
	if err := f.checkOperatorDir(); err != nil {
		return usageError{err}
	}
	var opMode *operatorMode // from --nats-operator-dir
	if f.operatorDir != "" {
		if opMode, err = loadOperatorMode(f.operatorDir, f.nodeID, f.dataDir); err != nil {
			return usageError{err}
		}
		if f.reviewers != "" {
			if opMode.reviewers, err = loadReviewers(f.reviewers); err != nil {
				return usageError{err}
			}
		}
	}
	if !f.dev && f.authFile == "" && f.operatorDir == "" && f.natsURL == "" && !f.insecure {
		return usageError{fmt.Errorf("a non-dev node needs NATS credentials: pass --auth FILE or --nats-operator-dir DIR (see --help), or --dev for a local single node")}
	}
	if err := f.sec.check(f.dev, f.insecure, len(peers)); err != nil {
		return usageError{err}
	}
	if err := checkClusterPeers(f.dev, f.peers, f.routes); err != nil {
		return usageError{err}
	}
	var initial []byte
	if f.policyFile != "" {
		raw, err := os.ReadFile(f.policyFile)
		if err != nil {
			return usageError{fmt.Errorf("--policy: %w", err)}
		}
		p, err := policyfile.Parse(raw)
		if err != nil {
			return usageError{errors.New("--policy " + policyProblems(f.policyFile, err))}
		}
		initial = p.Canonical()
	}

	rcfg := raftnode.DefaultConfig()
	rcfg.NodeID, rcfg.DataDir, rcfg.RaftBind, rcfg.Advertise, rcfg.Peers = f.nodeID, filepath.Join(f.dataDir, "raft"), f.raftAddr, f.raftAdv, peers
	rcfg.LogStore, rcfg.WALSegmentSize = f.raftLogStore, f.walSegmentMB<<20
	if f.logLevel == "debug" {
		rcfg.LogLevel = "info"
	}
	rcfg.Logger = raftnode.SlogLogger(lg)
	if err := f.sec.applyRaft(&rcfg); err != nil {
		return usageError{err}
	}
	if err := rcfg.Validate(); err != nil {
		return usageError{err}
	}
	// Before anything in the data dir is opened: a second node on the same
	// raft log and JetStream store would corrupt both.
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = "."
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := waitResolvable(ctx, rcfg.Advertise, rcfg.RaftBind, advertiseResolveWait, lg); err != nil {
		return err
	}

	// NATS: embedded by default.
	var (
		ns        *server.Server
		nc        *nats.Conn
		connURL   = f.natsURL
		reviewers map[string][]string // from --auth
	)
	if f.natsURL == "" {
		scfg := natsbus.DefaultServerConfig()
		scfg.Name, scfg.Host, scfg.Port = f.nodeID, f.natsHost, f.natsPort
		scfg.StoreDir = filepath.Join(f.dataDir, "jetstream")
		if f.clusterPort != 0 {
			scfg.ClusterName, scfg.ClusterPort, scfg.Routes = "writ", f.clusterPort, splitList(f.routes)
			scfg.ClusterHost = f.natsHost
		}
		f.sec.applyNATS(&scfg)
		issuerPW := ""
		if f.authFile != "" {
			users, revs, err := loadUsers(f.authFile)
			if err != nil {
				return usageError{err}
			}
			reviewers = revs
			issuerPW = randomSecret()
			scfg.Users = append(users, natsbus.IssuerUser("writ-issuer-"+f.nodeID, issuerPW))
		}
		if opMode != nil {
			scfg.Operator = &opMode.server
			reviewers = opMode.reviewers
		}
		ns, err = natsbus.StartServer(scfg, natsLogf(lg))
		if err != nil {
			return fmt.Errorf("starting embedded NATS: %w", err)
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		opts := []nats.Option{nats.InProcessServer(ns), nats.Name("writ-issuer-" + f.nodeID), nats.MaxReconnects(-1)}
		if issuerPW != "" {
			opts = append(opts, nats.UserInfo("writ-issuer-"+f.nodeID, issuerPW))
		}
		if opMode != nil {
			opts = append(opts, opMode.issuerOption())
		}
		// natsbus.ClientURL, not ns.ClientURL(): a server bound to 0.0.0.0
		// (--nats-host 0.0.0.0 in a container) is reached through loopback,
		// and with TLS the certificate is checked against that host and CA.
		opts = append(opts, f.sec.natsOptions()...)
		connURL = natsbus.ClientURL(ns)
		nc, err = nats.Connect(connURL, opts...)
	} else {
		nc, err = nats.Connect(f.natsURL, append([]nats.Option{nats.Name("writ-issuer-" + f.nodeID), nats.MaxReconnects(-1)}, f.sec.natsOptions()...)...)
	}
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	defer nc.Close()
	var creds *natsauth.Manager
	if opMode != nil {
		var closeSys func()
		if creds, closeSys, err = opMode.manager(ns, connURL, f.sec.natsOptions()); err != nil {
			return fmt.Errorf("operator mode: %w", err)
		}
		defer closeSys()
	}

	var mx *metricsServer
	if f.metricsAddr != "" {
		// Before raft starts, so its stage timers cover the log it replays
		// and the entries a starting leader commits.
		if mx, err = serveMetrics(f.metricsAddr, f.nodeID, lg); err != nil {
			return err
		}
		defer mx.stop()
	}
	node, err := raftnode.Start(rcfg, stderr)
	if err != nil {
		return err
	}
	defer node.Close()

	icfg := issuer.DefaultConfig()
	icfg.DevMode, icfg.InitialPolicy, icfg.Logger = f.dev, initial, lg
	icfg.StreamReplicas, icfg.ReceiptFormat = f.replicas, f.format
	icfg.RefusalRate, icfg.RefusalBurst = f.refusalRate, f.refusalBurst
	icfg.PublishLinger = f.linger
	icfg.StatusDigestShare = f.digestShare
	icfg.NATSServer, icfg.RaftTLS, icfg.NATSTLS, icfg.Auth = ns, f.sec.tls(), f.sec.tls(), f.authFile != "" || opMode != nil
	icfg.Credentials = creds
	if icfg.AdvertiseNATS, err = f.advertiseNATS(ns); err != nil {
		return usageError{err}
	}
	icfg.Reviewers = reviewers
	rh.set(func() (uint64, uint64) { return node.Raft().CurrentTerm(), node.Raft().AppliedIndex() })
	if icfg.StreamReplicas == 0 {
		icfg.StreamReplicas = 1
		if len(peers) >= 3 {
			icfg.StreamReplicas = 3
		}
	}
	svc, err := issuer.New(icfg, node, nc)
	if err != nil {
		return usageError{err}
	}
	if mx != nil {
		svc.EnableMetrics(mx.reg)
	}
	if f.dev {
		devBanner(stdout, f, connURL)
	} else {
		if f.authFile == "" && opMode == nil && f.natsURL == "" {
			lg.Warn("running WITHOUT NATS credentials (--insecure-no-auth): any client may act as any worker")
		}
		lg.Info("issuer node started", "raft", f.raftAddr, "nats", connURL, "peers", len(peers))
	}
	probe := storageProbe{raft: node.StorageHealth}
	if ns != nil {
		probe.jetStream = ns.JetStreamEnabled
	}
	ctx, stopWatch := watchStorage(ctx, probe, lg)
	defer stopWatch()
	err = svc.Run(ctx)
	lg.Info("shutting down")
	if cause := context.Cause(ctx); errors.Is(cause, errStorageFailed) {
		return cause
	}
	return err
}

// devBanner prints what a development node is and commands to talk to it
// that work when pasted: they name --nats-url unless it is the clients'
// default.
func devBanner(w io.Writer, f serveFlags, connURL string) {
	url := ""
	if connURL != connect.DefaultURL {
		url = " --nats-url " + connURL
	}
	fmt.Fprintf(w, `writ issuer (development mode) — NO AUTHENTICATION: any local process may act as any worker.
  node      %s
  raft      %s
  nats      %s
  data      %s
Talk to it from another shell:
  worker-agent request%s --worker w1 --lane coordinator --tool Bash --args '{"command":"ls"}'
  worker-agent spend%s <grant_id> --worker w1 --args '{"command":"ls"}'
  issuer status%s
  auditor verify%s
Press Ctrl-C to stop.
`, f.nodeID, f.raftAddr, connURL, f.dataDir, url, url, url, url)
}

// advertiseResolveWait bounds how long a node waits for its raft advertise
// host name to resolve before giving up.
const advertiseResolveWait = 2 * time.Minute

// waitResolvable waits until the host of the raft advertise address (adv,
// or bind when adv is empty) resolves. raftnode resolves it once, at start,
// and fails if it cannot; in a container the node's own DNS name (a
// Kubernetes StatefulSet's writ-0.writ.<ns>.svc, a compose service name)
// may appear only moments after the process starts. IP literals return at
// once.
func waitResolvable(ctx context.Context, adv, bind string, limit time.Duration, lg *slog.Logger) error {
	if adv == "" {
		adv = bind
	}
	host, _, err := net.SplitHostPort(adv)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil // Validate has judged the form; nothing to wait for
	}
	deadline := time.Now().Add(limit)
	for logged := false; ; {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := net.DefaultResolver.LookupHost(lctx, host)
		cancel()
		if err == nil {
			if logged {
				lg.Info("raft advertise address resolves", "addr", adv)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raft advertise address %q did not resolve within %s: %v", adv, limit, err)
		}
		if !logged {
			lg.Warn("waiting for the raft advertise address to resolve", "addr", adv, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// advertiseNATS is the client URL this node advertises for its embedded
// NATS server (see issuer.Config.AdvertiseNATS): --nats-advertise, else
// the server's listen address unless it listens on every interface (then
// no address is one every client can use). "" without an embedded server
// or with --nats-advertise off.
func (f *serveFlags) advertiseNATS(ns *server.Server) (string, error) {
	switch f.natsAdv {
	case "off":
		return "", nil
	case "":
		if ns == nil {
			return "", nil
		}
		if ip := net.ParseIP(f.natsHost); ip != nil && ip.IsUnspecified() {
			return "", nil
		}
		return natsbus.ClientURL(ns), nil
	}
	if strings.Contains(f.natsAdv, ",") {
		return "", fmt.Errorf("--nats-advertise %q: want one URL", f.natsAdv)
	}
	if err := connect.CheckURL(f.natsAdv); err != nil {
		return "", fmt.Errorf("--nats-advertise: %w", err)
	}
	return f.natsAdv, nil
}
