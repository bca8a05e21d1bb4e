package main

// Operator mode of `issuer serve` (--nats-operator-dir): the embedded
// servers trust the operator of an auth directory and keep accounts in a
// full resolver; the node connects with credentials it mints in memory.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
)

// checkOperatorDir refuses --nats-operator-dir combined with what it
// replaces or cannot apply to.
func (f *serveFlags) checkOperatorDir() error {
	if f.operatorDir == "" {
		if f.reviewers != "" {
			return errors.New("--reviewers applies to --nats-operator-dir; with --auth, reviewers and their roles are in the auth file")
		}
		return nil
	}
	switch {
	case f.authFile != "":
		return errors.New("--nats-operator-dir and --auth exclude each other: nats-server does not mix static users with operator mode; mint credentials with issuer auth mint instead")
	case f.natsURL != "":
		return errors.New("--nats-operator-dir configures the embedded NATS servers; with --nats-url configure that cluster's operator yourself")
	case f.insecure:
		return errors.New("--nats-operator-dir and --insecure-no-auth contradict each other")
	case f.dev:
		return errors.New("--dev runs without credentials; drop it to use --nats-operator-dir")
	}
	return nil
}

// reviewersFile is the --reviewers document.
type reviewersFile struct {
	Reviewers []struct {
		Name  string   `json:"name"`
		Roles []string `json:"roles"`
	} `json:"reviewers"`
}

// loadReviewers reads --reviewers: the reviewer identities an issuer in
// operator mode accepts decisions from, and the roles each holds.
func loadReviewers(path string) (map[string][]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--reviewers: %w", err)
	}
	var rf reviewersFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("--reviewers %s: %w (want {\"reviewers\":[{\"name\":\"dana\",\"roles\":[\"finance\"]}]})", path, err)
	}
	out := make(map[string][]string, len(rf.Reviewers))
	for i, r := range rf.Reviewers {
		if err := natsbus.ValidToken(r.Name); err != nil {
			return nil, fmt.Errorf("--reviewers %s: reviewers[%d].name: %w", path, i, err)
		}
		if _, dup := out[r.Name]; dup {
			return nil, fmt.Errorf("--reviewers %s: reviewers[%d].name: %q is listed twice", path, i, r.Name)
		}
		out[r.Name] = append([]string{}, r.Roles...)
	}
	return out, nil
}

// operatorMode is a node's operator-mode setup.
type operatorMode struct {
	auth   *natsauth.Authority
	server natsbus.OperatorAuth
	issuer natsauth.Credential // the node's own connection
	sys    natsauth.Credential // the node's system-account connection
	// reviewers are from --reviewers.
	reviewers map[string][]string
}

// ResolverDirName is where, under --data-dir, a node's account resolver
// keeps the account JWTs.
const ResolverDirName = "nats-accounts"

func loadOperatorMode(dir, nodeID, dataDir string) (*operatorMode, error) {
	a, err := natsauth.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("--nats-operator-dir: %w", err)
	}
	m := &operatorMode{auth: a, server: a.ServerAuth(filepath.Join(dataDir, ResolverDirName))}
	// The node's credentials live in memory only and never expire: the
	// process restarts with new JWTs, and nothing of them is on disk.
	if m.issuer, err = a.Mint(natsauth.Identity{Role: natsauth.RoleIssuer, Name: "writ-issuer-" + nodeID}, time.Time{}); err != nil {
		return nil, fmt.Errorf("--nats-operator-dir: the node's own credential: %w", err)
	}
	if m.sys, err = a.SystemCredential("writ-issuer-"+nodeID+"-sys", time.Time{}); err != nil {
		return nil, fmt.Errorf("--nats-operator-dir: the node's system-account credential: %w", err)
	}
	if err := a.CanServe(); err != nil {
		return nil, fmt.Errorf("--nats-operator-dir: %w", err)
	}
	return m, nil
}

func (m *operatorMode) issuerOption() nats.Option {
	return nats.UserJWTAndSeed(m.issuer.JWT, string(m.issuer.Seed))
}

// manager connects to the system account and returns the node's
// credential Manager, and a function closing that connection.
func (m *operatorMode) manager(ns *server.Server, url string, extra []nats.Option) (*natsauth.Manager, func(), error) {
	opts := append([]nats.Option{
		nats.InProcessServer(ns),
		nats.Name(m.sys.Name),
		nats.MaxReconnects(-1),
		nats.UserJWTAndSeed(m.sys.JWT, string(m.sys.Seed)),
		nats.CustomInboxPrefix(natsbus.InboxPrefix(m.sys.Name)),
	}, extra...)
	sys, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the system account: %w", err)
	}
	mgr, err := natsauth.NewManager(m.auth, sys)
	if err != nil {
		sys.Close()
		return nil, nil, err
	}
	return mgr, sys.Close, nil
}
