package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/worker"
)

func newRequestCmd(g *globals) *cobra.Command {
	var (
		lane, session, tool, key string
		route                    string
		routeGen                 uint64
		args                     argsInput
		ttl                      time.Duration
		sources                  []string
		review, artifact         string
	)
	cmd := &cobra.Command{
		Use:   "request --worker W --lane L --tool T --args JSON",
		Short: "Ask the issuer for a grant for one exact tool call",
		Long: `Ask the issuer for a single-spend grant bound to one exact tool call: the
tool name and its canonical JSON arguments. On permit, stdout holds the
envelope with the grant_id to spend when the call starts.

` + exitCodesHelp,
		Example: `  worker-agent request --worker w1 --lane specialist --tool Bash --args '{"command":"ls"}'
  echo '{"to":"ops@example.com"}' | worker-agent request --lane isolated --tool send_mail --args-file - --source web-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			if lane == "" {
				return usageErr("--lane is required")
			}
			if err := checkID("--lane", lane); err != nil {
				return err
			}
			if cmd.Flags().Changed("session") {
				if err := checkID("--session", session); err != nil {
					return err
				}
			}
			if tool == "" {
				return usageErr("--tool is required")
			}
			if err := checkName("--tool", tool); err != nil {
				return err
			}
			var srcs []string
			seen := map[string]bool{}
			for _, s := range sources {
				if err := checkID("--source", s); err != nil {
					return err
				}
				if !seen[s] {
					seen[s] = true
					srcs = append(srcs, s)
				}
			}
			if ttl < time.Millisecond {
				return usageErr("--ttl must be at least 1ms, got %v", ttl)
			}
			if cmd.Flags().Changed("idempotency-key") {
				if err := checkName("--idempotency-key", key); err != nil {
					return err
				}
			}
			switch args.given() {
			case 0:
				return usageErr("--args or --args-file is required (the tool arguments as JSON)")
			case 2:
				return usageErr("give either --args or --args-file, not both")
			}
			raw, err := args.read(g.Stdin)
			if err != nil {
				return err
			}
			rb, err := worker.RouteFromEnv(route, routeGen)
			if err != nil {
				return usageErr("%v", err)
			}
			req := api.GrantRequest{
				Lane: lane, Session: session, Tool: tool, Args: raw,
				TTLMillis: ttl.Milliseconds(), Sources: srcs, IdempotencyKey: newKey(key),
				Route: rb.Route, RouteGen: rb.Gen,
			}
			if (review == "") != (artifact == "") {
				return usageErr("--review and --artifact go together: the review that approves the call and the artifact it approved")
			}
			if review != "" {
				if _, _, _, ok := api.ParseReviewRef(review); !ok && !api.ValidReviewID(review) {
					return usageErr("--review %q: want a review id, caption or keep token", review)
				}
				sum, err := fileSHA256(artifact)
				if err != nil {
					return usageErr("--artifact: %v", err)
				}
				req.Review, req.ArtifactSHA256 = review, sum
			}
			return g.call(cmd.Context(), req.IdempotencyKey, func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
				return c.Grant(ctx, req)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&lane, "lane", "", "lane the call runs in (required)")
	f.StringVar(&route, "route", "", "route this call is work under (default $WRIT_ROUTE); the grant binds the lease's generation")
	f.Uint64Var(&routeGen, "route-gen", 0, "generation of the caller's lease on --route (default $WRIT_ROUTE_GEN; 0: the current one)")
	f.StringVar(&session, "session", "", "agent session id")
	f.StringVar(&tool, "tool", "", "tool name (required)")
	f.StringVar(&args.inline, "args", "", "tool arguments as JSON")
	f.StringVar(&args.file, "args-file", "", "read the tool arguments from a file, or - for stdin")
	f.DurationVar(&ttl, "ttl", 30*time.Second, "requested lifetime; the issuer may shorten it")
	f.StringSliceVar(&sources, "source", nil, "id of a source the arguments came from (repeatable)")
	f.StringVar(&key, "idempotency-key", "", "idempotency key (default: a fresh one; reuse it to retry)")
	f.StringVar(&review, "review", "", "the artifact review that approves this call (id, caption or keep token); with --artifact")
	f.StringVar(&artifact, "artifact", "", "the artifact the review approved, as it is now (its SHA-256 is computed here)")
	return cmd
}
