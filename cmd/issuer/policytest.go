package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/issuer"
)

func policyTestCmd(stdout io.Writer) *cobra.Command {
	var (
		o      connect.Options
		worker string
		args   string
		req    api.GrantRequest
		amount int64
		live   bool
		asJSON bool
		expect string
	)
	cmd := &cobra.Command{
		Use:   "test [FILE | --live] --worker W --lane L --tool T --args JSON",
		Short: "judge one call against a policy without recording anything (a dry run)",
		Long: `Judge one tool call as the issuer would and print the decision (permit,
deny or approval_required), the reason, what was missing, the rules that
fired, the surface and target, and the provenance grounds. Nothing is
recorded: no grant, review, receipt or ledger entry.

With FILE (YAML or JSON) the call is judged against that document on a
fresh state: no earlier grants, so no effect-ledger repeats, used
preauthorizations or quota windows. Without FILE, or with --live, the
leader judges it against the policy in force and its current usage, so a
repeated effect or an exhausted preauthorization shows as it would for the
worker now. Either way the judging is the state machine's own code.

Exit codes: 0 judged (whatever the decision; with --expect, only when the
decision is the one expected), 1 the decision differs from --expect or the
request was malformed, 2 usage, 3 issuer unavailable (--live).`,
		Example: `  issuer policy test policy.yaml --worker w1 --lane coordinator --tool Bash --args '{"command":"git status"}'
  issuer policy test --live --worker w1 --lane coordinator --tool Read --args '{"file_path":"/etc/passwd"}' --json
  issuer policy test policy.yaml --worker w1 --lane coordinator --tool Bash --args '{"command":"curl x | sh"}' --expect deny`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			switch {
			case len(files) == 1 && live:
				return usageError{fmt.Errorf("give FILE or --live, not both")}
			case worker == "" || req.Lane == "" || req.Tool == "":
				return usageError{fmt.Errorf("--worker, --lane and --tool are required")}
			case expect != "" && expect != string(grants.Permit) && expect != string(grants.Deny) && expect != string(grants.ApprovalRequired):
				return usageError{fmt.Errorf("--expect: %q is not permit, deny or approval_required", expect)}
			}
			if !json.Valid([]byte(args)) {
				return usageError{fmt.Errorf(`--args: not valid JSON (give the tool's arguments as one JSON object, e.g. '{"command":"ls"}')`)}
			}
			req.Args = json.RawMessage(args)
			if cmd.Flags().Changed("amount") {
				if amount < 0 {
					return usageError{fmt.Errorf("--amount must not be negative")}
				}
				a := uint64(amount)
				req.Amount = &a
			}
			var (
				a    api.PolicyTestAnswer
				what string
			)
			if len(files) == 1 {
				p, err := readPolicy(files[0])
				if err != nil {
					return err
				}
				a = issuer.JudgeWithPolicy(p, time.Now().UnixNano(), worker, &req)
				what = fmt.Sprintf("%s (digest %s), on a fresh state", files[0], shortDigest(p.Digest().String()))
			} else {
				c, ctx, done, err := operatorClient(cmd.Context(), &o)
				if err != nil {
					return err
				}
				defer done()
				if a, err = c.PolicyTest(ctx, api.PolicyTestRequest{Worker: worker, Request: req}); err != nil {
					return fmt.Errorf("%w: %v", connect.ErrConnect, err)
				}
				what = fmt.Sprintf("epoch %d in force (digest %s), with its current usage", a.Epoch, shortDigest(a.PolicyDigest))
			}
			if a.Error != "" {
				return refusedError{"request: " + a.Error}
			}
			if asJSON {
				if err := printJSON(stdout, a); err != nil {
					return err
				}
			} else {
				printJudgement(stdout, a, what)
			}
			if expect != "" && a.Decision != expect {
				return refusedError{fmt.Sprintf("decision %s, expected %s", a.Decision, expect)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&worker, "worker", "", "the worker making the call")
	f.StringVar(&req.Lane, "lane", "", "the worker's lane")
	f.StringVar(&req.Tool, "tool", "", "the tool name, as the harness names it (Bash, Read, mcp__server__tool)")
	f.StringVar(&args, "args", "{}", "the tool's arguments as a JSON object")
	f.StringVar(&req.Cwd, "cwd", "", "the working directory relative paths resolve against")
	f.StringVar(&req.ResolvedTarget, "resolved", "", "the target path with symlinks resolved, as the hook reports it")
	f.StringVar(&req.TargetLabel, "label", "", "the target label shown to a person")
	f.Int64Var(&amount, "amount", 0, "the declared amount (payments)")
	f.Uint64Var(&req.Bytes, "bytes", 0, "the declared byte count")
	f.StringVar(&req.Session, "session", "", "the session id")
	f.BoolVar(&live, "live", false, "judge against the policy in force on the issuer (the default without FILE)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&expect, "expect", "", "exit 1 unless the decision is this one (permit, deny, approval_required)")
	addConnFlags(cmd, &o)
	return cmd
}

// printJudgement writes a dry run's answer for a person.
func printJudgement(w io.Writer, a api.PolicyTestAnswer, what string) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	decision := a.Decision
	if a.Reason != "" {
		decision += " (" + a.Reason + ")"
	}
	surface := a.Surface
	if surface != "" && a.Consequence != "" {
		surface += " (" + a.Operation + ", " + a.Consequence + ")"
	}
	expires := ""
	if a.ExpiresInMS > 0 {
		expires = "grant lives " + (time.Duration(a.ExpiresInMS) * time.Millisecond).String()
	}
	for _, row := range [][2]string{
		{"decision", decision}, {"missing", a.Missing}, {"detail", a.Detail},
		{"rules", strings.Join(a.Rules, ", ")}, {"surface", surface}, {"target", a.Target}, {"lifetime", expires},
	} {
		if row[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
	}
	for _, g := range a.Grounds {
		fmt.Fprintf(tw, "ground\t%s\n", g)
	}
	fmt.Fprintf(tw, "policy\t%s\n", what)
	_ = tw.Flush()
	fmt.Fprintln(w, "(a dry run: nothing was recorded)")
}
