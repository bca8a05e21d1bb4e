package natsbus

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultResolverSync is how often, when OperatorAuth.ResolverSync is zero,
// each server compares its account JWTs with the others' and takes the
// newer ones: the bound on how long a server that missed an update (it was
// partitioned or down when the update was pushed) keeps the old one after
// it is back.
const DefaultResolverSync = 10 * time.Second

// OperatorAuth runs the embedded server in NATS operator mode: clients
// authenticate with user JWTs signed (through an account) by the trusted
// operator, and prove they hold the user's nkey seed. Accounts live in a
// full account resolver (nats-server's "full" NATS-based resolver) kept in
// ResolverDir. An account JWT update pushed to any server on
// $SYS.REQ.ACCOUNT.<account>.CLAIMS.UPDATE is stored by every server it
// reaches over routes, and servers that missed it fetch it when they next
// compare (every ResolverSync). When an update adds a user revocation, each
// server closes that user's open connections at once and refuses new ones.
type OperatorAuth struct {
	// OperatorJWT is the trusted operator's JWT.
	OperatorJWT string
	// SystemAccount is the system account's public key; the resolver's
	// update, lookup and sync requests run in it.
	SystemAccount string
	// Accounts are account JWTs stored in the resolver at start, unless it
	// already holds a newer one (the copy pushed with later revocations).
	// The system account's JWT must be among them.
	Accounts []string
	// ResolverDir is the resolver's directory (one file per account).
	ResolverDir string
	// ResolverSync is how often servers compare their account JWTs; 0
	// means DefaultResolverSync.
	ResolverSync time.Duration
}

// validate checks the operator-mode settings; field prefixes errors.
func (o *OperatorAuth) validate(field string) error {
	oc, err := jwt.DecodeOperatorClaims(o.OperatorJWT)
	if err != nil {
		return fieldErr(field+".OperatorJWT", "not an operator JWT: %v", err)
	}
	if !nkeys.IsValidPublicAccountKey(o.SystemAccount) {
		return fieldErr(field+".SystemAccount", "%q is not an account public key", o.SystemAccount)
	}
	if oc.SystemAccount != "" && oc.SystemAccount != o.SystemAccount {
		return fieldErr(field+".SystemAccount", "%s differs from the operator JWT's system account %s", o.SystemAccount, oc.SystemAccount)
	}
	if strings.TrimSpace(o.ResolverDir) == "" {
		return fieldErr(field+".ResolverDir", "required (the account resolver's directory)")
	}
	if o.ResolverSync < 0 {
		return fieldErr(field+".ResolverSync", "must not be negative, got %v", o.ResolverSync)
	}
	sys := false
	for i, a := range o.Accounts {
		ac, err := jwt.DecodeAccountClaims(a)
		if err != nil {
			return fieldErr(fmt.Sprintf("%s.Accounts[%d]", field, i), "not an account JWT: %v", err)
		}
		if !oc.DidSign(ac) {
			return fieldErr(fmt.Sprintf("%s.Accounts[%d]", field, i), "account %s is not signed by the operator %s or one of its signing keys", ac.Subject, oc.Subject)
		}
		sys = sys || ac.Subject == o.SystemAccount
	}
	if !sys {
		return fieldErr(field+".Accounts", "the system account's JWT (%s) is missing", o.SystemAccount)
	}
	return nil
}

// apply sets opts to operator mode with a full resolver preloaded with the
// account JWTs. The caller must Close the returned resolver if the server
// is never started (Shutdown closes it otherwise).
func (o *OperatorAuth) apply(opts *server.Options) (server.AccountResolver, error) {
	oc, err := jwt.DecodeOperatorClaims(o.OperatorJWT)
	if err != nil { // unreachable after validate
		return nil, fieldErr("Operator.OperatorJWT", "%v", err)
	}
	sync := o.ResolverSync
	if sync == 0 {
		sync = DefaultResolverSync
	}
	res, err := server.NewDirAccResolver(o.ResolverDir, 0, sync, server.NoDelete)
	if err != nil {
		return nil, fieldErr("Operator.ResolverDir", "%v", err)
	}
	for _, a := range o.Accounts {
		ac, err := jwt.DecodeAccountClaims(a)
		if err == nil {
			err = res.Store(ac.Subject, a) // keeps a newer stored copy
		}
		if err != nil {
			res.Close()
			return nil, fieldErr("Operator.Accounts", "storing account JWT in %s: %v", o.ResolverDir, err)
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.SystemAccount = o.SystemAccount
	opts.AccountResolver = res
	return res, nil
}
