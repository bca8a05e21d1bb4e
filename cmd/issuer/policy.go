package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/policy"
)

func policyCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "validate, apply or show the policy document",
		Long: `The policy document is the operator's trust root: which lanes exist, which
tools each may call, and how long grants live. Applying one is a single log
entry that moves the policy epoch; every unspent grant from an older epoch
is then refused at spend with epoch_stale.`,
	}
	var o connect.Options
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "check a policy document without applying it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := readPolicy(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "ok: %s is valid (digest %s)\n", args[0], p.Digest())
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
	var so connect.Options
	show := &cobra.Command{
		Use:   "show",
		Short: "print the policy in force and its epoch",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := operatorClient(cmd.Context(), &so)
			if err != nil {
				return err
			}
			defer done()
			msg, err := c.NC.RequestWithContext(ctx, "writ.op.policy.show", []byte(`{"v":1}`))
			if err != nil {
				return fmt.Errorf("%w: %v", connect.ErrConnect, err)
			}
			var out json.RawMessage = msg.Data
			b, _ := json.MarshalIndent(out, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return nil
		},
	}
	addConnFlags(apply, &o)
	addConnFlags(show, &so)
	cmd.AddCommand(validate, apply, show)
	return cmd
}

func readPolicy(path string) (*policy.Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, refusedError{fmt.Sprintf("%s: %v", path, err)}
	}
	return p, nil
}
