package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/natsauth"
)

// EnvAuthDir is read when --dir is not given.
const EnvAuthDir = "WRIT_AUTH_DIR"

func authCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "NATS operator-mode credentials: create the keys, mint and revoke user credentials",
		Long: `In operator mode (issuer serve --nats-operator-dir DIR) the embedded NATS
servers trust an operator key, and every client connects with a user JWT
signed through the writ account, proving it holds the user's seed. NATS
itself then enforces what each user may publish: a worker only under
writ.api.<worker>.>, and its replies arrive only on _INBOX.<worker>.>.

  issuer auth init --dir DIR                       create the keys (once)
  issuer auth mint --dir DIR --worker w1 --ttl 1h --out w1.creds
  issuer auth revoke --dir DIR --worker w1 --nats-url nats://host:4222

See docs/operator-mode.md for what to keep offline and what to back up.`,
	}
	cmd.AddCommand(authInitCmd(stdout), authMintCmd(stdout, stderr), authRevokeCmd(stdout, stderr))
	return cmd
}

// authErr maps natsauth errors to the command's exit codes.
func authErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, natsauth.ErrInvalid), errors.Is(err, natsauth.ErrBadDir), errors.Is(err, natsauth.ErrMissingKey):
		return usageError{err}
	case errors.Is(err, natsauth.ErrExists):
		return refusedError{err.Error()}
	}
	return err
}

func addDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "dir", os.Getenv(EnvAuthDir), "auth directory made by issuer auth init (env "+EnvAuthDir+")")
}

func needDir(dir string) error {
	if strings.TrimSpace(dir) == "" {
		return usageError{errors.New("--dir is required: the directory `issuer auth init --dir DIR` created (or set " + EnvAuthDir + ")")}
	}
	return nil
}

func authInitCmd(stdout io.Writer) *cobra.Command {
	var (
		dir    string
		asJSON bool
		o      = natsauth.DefaultInitOptions()
	)
	cmd := &cobra.Command{
		Use:   "init --dir DIR",
		Short: "create the operator, system account and writ account keys and JWTs",
		Long: `Create, in DIR (made 0700 if missing), every key and JWT of operator mode,
each file 0600. It refuses to run if any of them exists: keys are never
overwritten.

  operator.nk          operator identity seed       OFFLINE (back up)
  operator-signing.nk  operator signing seed        issuer nodes; signs account
                                                    updates, revocations included
  operator.jwt         operator JWT                 public
  system.nk            system account seed          OFFLINE (back up)
  system-signing.nk    system account signing seed  issuer nodes
  system.jwt           system account JWT           public
  account.nk           writ account seed            OFFLINE (back up)
  account-signing.nk   writ account signing seed    issuer nodes, auth mint
  account.jwt          writ account JWT             public

Copy the directory to every issuer node without the three identity seeds
(operator.nk, system.nk, account.nk); keep those, and a copy of the whole
directory, offline. Losing the signing seeds means re-signing with the
identity seeds; losing everything means a new operator and new credentials
for every client.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			res, err := natsauth.Init(dir, o)
			if err != nil {
				return authErr(err)
			}
			if asJSON {
				_ = printJSON(stdout, res)
				return nil
			}
			fmt.Fprintf(stdout, `created operator-mode keys in %s
  operator        %s
  system account  %s
  writ account    %s
Keep offline and back up: %s
Start the issuer with:  issuer serve --nats-operator-dir %s ...
Mint a worker:          issuer auth mint --dir %s --worker w1 --ttl 1h --out w1.creds
`, res.Dir, res.Operator, res.SystemAccount, res.Account, strings.Join(res.Offline, ", "), res.Dir, res.Dir)
			return nil
		},
	}
	addDirFlag(cmd, &dir)
	cmd.Flags().StringVar(&o.OperatorName, "operator-name", o.OperatorName, "the operator's name in its JWT")
	cmd.Flags().StringVar(&o.AccountName, "account-name", o.AccountName, "the writ account's name in its JWT")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// identityFlags select whose credential a command is about.
type identityFlags struct {
	worker, operator, reviewer, auditor string
	incarnation                         uint64
	incarnations                        []uint
}

func (f *identityFlags) add(cmd *cobra.Command, many bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.worker, "worker", "", "a worker: may publish only under writ.api.<worker>.>")
	fl.StringVar(&f.operator, "operator", "", "an operator's tool: may publish commands on writ.op.>")
	fl.StringVar(&f.reviewer, "reviewer", "", "a reviewer: may publish only under writ.review.<name>.>")
	fl.StringVar(&f.auditor, "auditor", "", "an auditor: may read the receipts, publish nothing")
	if many {
		fl.UintSliceVar(&f.incarnations, "incarnation", []uint{0}, "the worker's incarnation(s), comma separated or repeated")
	} else {
		fl.Uint64Var(&f.incarnation, "incarnation", 0, "the worker's incarnation (each has its own key)")
	}
}

func (f *identityFlags) identities(cmd *cobra.Command) ([]natsauth.Identity, error) {
	var ids []natsauth.Identity
	for _, c := range []struct {
		role natsauth.Role
		name string
	}{{natsauth.RoleWorker, f.worker}, {natsauth.RoleOperator, f.operator}, {natsauth.RoleReviewer, f.reviewer}, {natsauth.RoleAuditor, f.auditor}} {
		if c.name != "" {
			ids = append(ids, natsauth.Identity{Role: c.role, Name: c.name})
		}
	}
	if len(ids) != 1 {
		return nil, usageError{errors.New("name exactly one of --worker, --operator, --reviewer or --auditor")}
	}
	if cmd.Flags().Changed("incarnation") && ids[0].Role != natsauth.RoleWorker {
		return nil, usageError{errors.New("--incarnation applies to --worker only")}
	}
	if ids[0].Role != natsauth.RoleWorker {
		return ids, nil
	}
	if f.incarnations == nil {
		ids[0].Incarnation = f.incarnation
		return ids, nil
	}
	out := make([]natsauth.Identity, 0, len(f.incarnations))
	for _, n := range f.incarnations {
		out = append(out, natsauth.Worker(ids[0].Name, uint64(n)))
	}
	return out, nil
}

// mintOutput is `auth mint --json`.
type mintOutput struct {
	natsauth.Credential
	CredsFile string `json:"creds_file,omitempty"`
	Creds     string `json:"creds,omitempty"`
}

func authMintCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		dir      string
		idf      identityFlags
		ttl      time.Duration
		noExpiry bool
		out      string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "mint --dir DIR (--worker W | --operator N | --reviewer N | --auditor N) --ttl D [--out FILE]",
		Short: "mint a user credential (.creds file) that NATS enforces",
		Long: `Mint a user JWT signed with the writ account's signing key (only
account-signing.nk and the JWTs of DIR are needed) and write it with its
seed as a NATS .creds file: to --out (created 0600, never overwritten), or
to stdout. Clients use it with --nats-creds FILE.

A worker credential may publish only under writ.api.<worker>.> and receive
only on _INBOX.<worker>.>, and must expire: --ttl is required. Each
--incarnation of a worker has its own key, so revoking one leaves the next
working. Operator, reviewer and auditor credentials may be minted without
expiry with --no-expiry (a long-running auditor, for instance); revoke them
with 'issuer auth revoke' when they leak.

The key of a credential is derived from the account signing key and the
identity: minting the same identity again gives the same key with a new
JWT, and 'issuer auth revoke' revokes every JWT of that identity minted up
to then.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			ids, err := idf.identities(cmd)
			if err != nil {
				return err
			}
			var exp time.Time
			switch {
			case noExpiry && cmd.Flags().Changed("ttl"):
				return usageError{errors.New("--ttl and --no-expiry exclude each other")}
			case noExpiry && ids[0].Role == natsauth.RoleWorker:
				return usageError{errors.New("--no-expiry: a worker credential must expire; give --ttl")}
			case noExpiry:
			case ttl <= 0:
				return usageError{errors.New("--ttl is required (for example --ttl 1h): how long the credential is valid")}
			default:
				exp = time.Now().Add(ttl)
			}
			a, err := natsauth.Load(dir)
			if err != nil {
				return authErr(err)
			}
			c, err := a.Mint(ids[0], exp)
			if err != nil {
				return authErr(err)
			}
			creds, err := c.Creds()
			if err != nil {
				return err
			}
			res := mintOutput{Credential: c}
			if out != "" {
				if err := natsauth.WriteSecretFile(out, creds); err != nil {
					return authErr(err)
				}
				res.CredsFile = out
			}
			switch {
			case asJSON:
				if out == "" {
					res.Creds = string(creds)
				}
				_ = printJSON(stdout, res)
			case out == "":
				_, _ = stdout.Write(creds)
				fmt.Fprintln(stderr, describeCred(c))
			default:
				fmt.Fprintf(stdout, "wrote %s\n%s\n", out, describeCred(c))
			}
			return nil
		},
	}
	addDirFlag(cmd, &dir)
	idf.add(cmd, false)
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the credential is valid (required unless --no-expiry)")
	cmd.Flags().BoolVar(&noExpiry, "no-expiry", false, "no expiry (not for workers)")
	cmd.Flags().StringVar(&out, "out", "", "write the .creds file here (0600, never overwritten) instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (with the creds text when there is no --out)")
	return cmd
}

func describeCred(c natsauth.Credential) string {
	exp := "never expires"
	if !c.Expires.IsZero() {
		exp = "expires " + c.Expires.Format(time.RFC3339)
	}
	return fmt.Sprintf("%s user %s, %s; publish %v, receive %v", c.Identity, c.UserKey, exp, orAll(c.Publish), orAll(c.Receive))
}

func orAll(s []string) any {
	if s == nil {
		return "everything"
	}
	return s
}

func authRevokeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		dir     string
		idf     identityFlags
		o       connect.Options
		servers int
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "revoke --dir DIR (--worker W [--incarnation N,...] | --operator N | --reviewer N | --auditor N)",
		Short: "revoke a user's credentials on every NATS server",
		Long: `Revoke every credential of an identity minted up to now: add its user key
to the writ account JWT's revocations, sign it with the operator signing
key and push it, over the system account, to every server. Needs
operator-signing.nk, system-signing.nk and account-signing.nk in DIR.

When it returns successfully every server listed has stored the update,
closed the user's open connections, and refuses the user's JWTs at
connect. By default it waits for every server that answers a ping just
before the push (--servers N to require N); a server that was unreachable
takes the update at its next resolver sync (every 10s). Revocation times
have one-second resolution: a credential of the same identity minted in
the same second is revoked too; a new --incarnation is never affected.

This revokes the NATS credential only; 'issuer revoke --worker W' cancels
the worker's authority in the issuer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			ids, err := idf.identities(cmd)
			if err != nil {
				return err
			}
			if servers < 0 {
				return usageError{errors.New("--servers must not be negative")}
			}
			a, err := natsauth.Load(dir)
			if err != nil {
				return authErr(err)
			}
			sc, err := a.SystemCredential("writ-auth-revoke", time.Now().Add(10*time.Minute))
			if err != nil {
				return authErr(err)
			}
			o.JWT, o.Seed, o.Name = sc.JWT, string(sc.Seed), "writ-auth-revoke"
			ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
			defer cancel()
			nc, err := o.DialContext(ctx)
			if err != nil {
				return err
			}
			defer nc.Close()
			r, err := a.NewRevoker(nc)
			if err != nil {
				return authErr(err)
			}
			r.Servers = servers
			rev, err := r.Revoke(ctx, ids...)
			saved := ""
			if rev.AccountJWT != "" {
				// Servers started later from DIR (a new cluster) must
				// know the revocation too.
				if serr := a.SaveAccountJWT(rev.AccountJWT); serr != nil {
					saved = fmt.Sprintf("warning: the revocation is in force on the servers, but %s was not updated: %v", natsauth.AccountJWTFile, serr)
				} else {
					saved = "saved the revoking account JWT in " + filepath.Join(dir, natsauth.AccountJWTFile) + " (back it up)"
				}
			}
			if asJSON && (err == nil || len(rev.Servers) > 0) {
				_ = printJSON(stdout, rev)
			} else if err == nil {
				for i, id := range rev.Identities {
					fmt.Fprintf(stdout, "revoked %s (user %s) as of %s\n", id, rev.UserKeys[i], rev.At.Format(time.RFC3339))
				}
				fmt.Fprintf(stdout, "acknowledged by %d of %d servers: %s\n", len(rev.Servers), rev.Expected, strings.Join(rev.Servers, ", "))
			}
			if saved != "" {
				fmt.Fprintln(stderr, saved)
			}
			return authErr(err)
		},
	}
	addDirFlag(cmd, &dir)
	idf.add(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&o.URL, "nats-url", connect.DefaultURLFromEnv(), connect.URLHelp)
	fl.StringVar(&o.CAFile, "nats-ca", os.Getenv(connect.EnvCA), "CA certificate for a TLS NATS server (env "+connect.EnvCA+")")
	fl.DurationVar(&o.Timeout, "timeout", connect.DefaultTimeout, "how long to keep trying, connecting included, before giving up")
	fl.IntVar(&servers, "servers", 0, "how many servers must acknowledge (default: every server that answers a ping)")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
