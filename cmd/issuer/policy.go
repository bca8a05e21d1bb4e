package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

func policyCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "validate, apply, show or diff the policy document",
		Long: `The policy document is the operator's trust root: lanes, tool surfaces with
their consequence classes and targets, allowances and denials,
preauthorizations, protected paths and domains, review classes, shape rules,
quotas and the effect ledger (docs/policy.md). Files may be YAML or JSON.

Applying one is a single log entry that moves the policy epoch; every
unspent grant from an older epoch is then refused at spend with
epoch_stale. A document that fails validation is refused with the field
named, and the epoch in force does not change.`,
	}
	var o, so, do connect.Options
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "check a policy document without applying it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := readPolicy(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "ok: %s is a valid version %d policy (digest %s)\n", args[0], p.Version, p.Digest())
			printSummary(stdout, p)
			return nil
		},
	}
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "apply a policy document (moves the epoch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := readPolicy(args[0])
			if err != nil {
				return err
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.SetPolicy(ctx, p.Canonical())
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	var (
		epoch       uint64
		recommended bool
		legacy      bool
	)
	show := &cobra.Command{
		Use:   "show [--epoch N | --recommended | --default]",
		Short: "print the policy in force, or of epoch N",
		Long: `Print the policy in force and its epoch, or with --epoch N the document of
an older epoch (read from its epoch receipt in the receipt stream).
--recommended prints the recommended version 2 policy (a starting point for
your own; docs/policy.example.yaml), --default the built-in version 1
policy a fresh issuer starts with; neither needs an issuer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case recommended && legacy:
				return usageError{fmt.Errorf("give --recommended or --default, not both")}
			case recommended || legacy:
				p := policy.Default()
				if recommended {
					p = policy.Recommended()
				}
				return printJSON(stdout, api.PolicyShow{Digest: p.Digest().String(), Policy: p.Canonical()})
			}
			ps, err := fetchPolicy(cmd.Context(), &so, epoch)
			if err != nil {
				return err
			}
			return printJSON(stdout, ps)
		},
	}
	show.Flags().Uint64Var(&epoch, "epoch", 0, "show the document of this epoch (default: the one in force)")
	show.Flags().BoolVar(&recommended, "recommended", false, "print the recommended version 2 policy")
	show.Flags().BoolVar(&legacy, "default", false, "print the built-in version 1 policy")
	diff := &cobra.Command{
		Use:   "diff FILE",
		Short: "show what applying FILE would change, field by field",
		Long: `Compare FILE with the policy in force, field by field: "+ field: value" is
added, "- field: value" removed, "~ field: old -> new" changed. Entries of
lists with ids (surfaces, rules, preauthorizations, quotas, shape rules) are
matched by id; a ".position" change means the entry moved, which matters
where the first match wins (surfaces).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			next, err := readPolicy(args[0])
			if err != nil {
				return err
			}
			ps, err := fetchPolicy(cmd.Context(), &do, 0)
			if err != nil {
				return err
			}
			var cur *policy.Policy
			if len(ps.Policy) > 0 {
				if cur, err = policy.Parse(ps.Policy); err != nil {
					return fmt.Errorf("%w: the issuer's policy does not parse: %v", connect.ErrConnect, err)
				}
			}
			changes := policy.Diff(cur, next)
			fmt.Fprintf(stdout, "epoch %d (digest %s) -> %s (digest %s): %d changes\n", ps.Epoch, shortDigest(ps.Digest), args[0], shortDigest(next.Digest().String()), len(changes))
			for _, c := range changes {
				fmt.Fprintln(stdout, c)
			}
			return nil
		},
	}
	addConnFlags(apply, &o)
	addConnFlags(show, &so)
	addConnFlags(diff, &do)
	cmd.AddCommand(validate, apply, show, diff)
	return cmd
}

// fetchPolicy asks the issuer for the document of an epoch.
func fetchPolicy(ctx context.Context, o *connect.Options, epoch uint64) (api.PolicyShow, error) {
	c, cctx, done, err := operatorClient(ctx, o)
	if err != nil {
		return api.PolicyShow{}, err
	}
	defer done()
	ps, err := c.PolicyShow(cctx, epoch)
	if err != nil {
		return ps, o.NoAnswer(err)
	}
	if ps.Error != "" {
		return ps, refusedError{ps.Error}
	}
	return ps, nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, string(b))
	return nil
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// printSummary lists what a document declares, one line per section.
func printSummary(w io.Writer, p *policy.Policy) {
	lanes := make([]string, 0, len(p.Lanes))
	for l := range p.Lanes {
		lanes = append(lanes, l)
	}
	sort.Strings(lanes)
	fmt.Fprintf(w, "  lanes: %s\n", strings.Join(lanes, ", "))
	if p.Version != policy.SchemaVersion {
		return
	}
	fmt.Fprintf(w, "  surfaces: %d, allow: %d, deny: %d, preauthorizations: %d, shape rules: %d, quotas: %d\n",
		len(p.Surfaces), len(p.Allow), len(p.Deny), len(p.Preauthorizations), len(p.ShapeRules), len(p.Quotas))
}

// readPolicy reads and validates a YAML or JSON policy file; a refusal
// names the field.
func readPolicy(path string) (*policy.Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	p, err := policyfile.Parse(raw)
	if err != nil {
		return nil, refusedError{fmt.Sprintf("%s: %v", path, err)}
	}
	return p, nil
}
