package main

import (
	"context"
	"encoding/json"
	"errors"
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
		Short: "validate, apply, show, diff or test the policy document",
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
		showJSON    bool
	)
	show := &cobra.Command{
		Use:   "show [--epoch N | --recommended | --default] [--json]",
		Short: "print the policy in force, or of epoch N, as a document apply accepts",
		Long: `Print the policy in force, or with --epoch N the document of an older
epoch (read from its epoch receipt in the receipt stream), as a document
that 'issuer policy apply' accepts as it is:

  issuer policy show > policy.yaml      # edit, then
  issuer policy diff policy.yaml && issuer policy apply policy.yaml

The default output is YAML, headed by comment lines naming the epoch and
the digest. --json prints the canonical JSON document itself (the bytes
the digest is taken over, so sha256sum of the output without its final
newline is the digest) and the epoch and digest on stderr.

--recommended prints the recommended version 2 policy (a starting point for
your own; docs/policy.example.yaml), --default the built-in policy a fresh
issuer applies when started without --policy (the same document); neither
needs an issuer.`,
		Example: `  issuer policy show
  issuer policy show --json | jq .lanes
  issuer policy show --epoch 1 > epoch1.yaml
  issuer policy show --recommended > policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				doc  []byte
				what string
			)
			switch {
			case recommended && legacy:
				return usageError{fmt.Errorf("give --recommended or --default, not both")}
			case (recommended || legacy) && cmd.Flags().Changed("epoch"):
				return usageError{fmt.Errorf("--epoch reads an issuer's history; it does not go with --recommended or --default")}
			case recommended || legacy:
				p, name := policy.Default(), "the built-in default policy"
				if recommended {
					p, name = policy.Recommended(), "the recommended policy"
				}
				// As the log would hold it: with the built-in rules.
				q, err := policy.WithBuiltins(p)
				if err != nil {
					return err
				}
				doc, what = q.Canonical(), fmt.Sprintf("%s, digest %s", name, q.Digest())
			default:
				ps, err := fetchPolicy(cmd.Context(), &so, epoch)
				if err != nil {
					return err
				}
				if len(ps.Policy) == 0 {
					return refusedError{fmt.Sprintf("epoch %d has no policy document", ps.Epoch)}
				}
				doc, what = ps.Policy, fmt.Sprintf("epoch %d, digest %s", ps.Epoch, ps.Digest)
				if ps.Seq != 0 {
					what += fmt.Sprintf(", applied by receipt %d", ps.Seq)
				}
			}
			return writePolicyDoc(stdout, cmd.ErrOrStderr(), doc, what, showJSON)
		},
	}
	show.Flags().Uint64Var(&epoch, "epoch", 0, "show the document of this epoch (default: the one in force)")
	show.Flags().BoolVar(&recommended, "recommended", false, "print the recommended version 2 policy")
	show.Flags().BoolVar(&legacy, "default", false, "print the built-in policy a fresh issuer applies")
	show.Flags().BoolVar(&showJSON, "json", false, "print the canonical JSON document (epoch and digest on stderr)")
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
	cmd.AddCommand(validate, apply, show, diff, policyTestCmd(stdout))
	return cmd
}

// writePolicyDoc prints a canonical document as YAML headed by a comment
// naming what it is, or with asJSON as the canonical JSON itself, the
// description going to stderr. Either form is what apply reads.
func writePolicyDoc(stdout, stderr io.Writer, doc []byte, what string, asJSON bool) error {
	if asJSON {
		fmt.Fprintf(stderr, "# %s\n", what)
		_, err := fmt.Fprintf(stdout, "%s\n", doc)
		return err
	}
	y, err := policyfile.ToYAML(doc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# writ policy: %s\n# apply with: issuer policy apply FILE\n", what)
	_, err = stdout.Write(y)
	return err
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

// printJSON writes v as indented JSON for a person or a script to read:
// '<', '>' and '&' are written as they are, not as \u003c escapes.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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

// readPolicy reads and validates a YAML or JSON policy file and adds
// writ's built-in rules, as the issuer does when it applies it (so the
// digest printed and the diff are those of the document the log will
// hold); a refusal names the field.
func readPolicy(path string) (*policy.Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	p, err := policyfile.Parse(raw)
	if err == nil {
		p, err = policy.WithBuiltins(p) // the document the log will hold
	}
	if err != nil {
		return nil, refusedError{policyProblems(path, err)}
	}
	return p, nil
}

// policyProblems describes why the document at path does not validate:
// every problem on a line of its own, each naming its field, under one
// "invalid policy" (not the package's prefix once per problem).
func policyProblems(path string, err error) string {
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		return fmt.Sprintf("%s: invalid policy, %d problems:\n  %s", path, len(ve.Problems)+ve.More, strings.Join(ve.Lines(), "\n  "))
	}
	if errors.Is(err, policy.ErrInvalid) {
		return fmt.Sprintf("%s: invalid policy: %s", path, policy.ProblemText(err))
	}
	return fmt.Sprintf("%s: %v", path, err)
}
