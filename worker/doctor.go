package worker

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/hookwire"
)

// ExitDoctor is doctor's exit code when a check failed.
const ExitDoctor = 1

// doctorProbe is the event doctor feeds an installed hook command: one the
// hook answers with exit 0 and no output, without reading its config or
// asking the issuer.
const doctorProbe = `{"session_id":"writ-doctor","hook_event_name":"Notification","message":"writ doctor probe"}`

// doctorDeadline bounds each network check and each hook probe when
// --timeout is not given.
const doctorDeadline = 5 * time.Second

// doctorCheck is one line of doctor's report.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"` // "ok" or "fail"
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// DoctorFlags are doctor's own flags.
type DoctorFlags struct {
	Project  string // the project whose settings to check; "" for the current directory and the user's
	User     bool   // only the user-level settings
	Config   string // the worker config to check; "" for the one the installed hook names
	StateDir string
	JSON     bool // print the report as JSON
}

// doctor runs every check.
// Doctor runs every check on the harnesses hs and prints the report:
// text, or JSON with f.JSON. A failed check is an *ExitError with
// ExitDoctor.
func (g *Agent) Doctor(ctx context.Context, flags *pflag.FlagSet, hs []string, f DoctorFlags) error {
	return g.reportChecks(g.doctor(ctx, flags, hs, f), f.JSON)
}

// doctor runs every check.
func (g *Agent) doctor(ctx context.Context, flags *pflag.FlagSet, hs []string, f DoctorFlags) []doctorCheck {
	timeout := doctorDeadline
	if flags.Changed("timeout") && g.Conn.Timeout > 0 {
		timeout = g.Conn.Timeout
	}
	var checks []doctorCheck
	hookChecks, configs := doctorHooks(ctx, hs, f, timeout)
	checks = append(checks, hookChecks...)
	if f.Config != "" {
		configs = []string{f.Config}
	}
	if len(configs) == 0 {
		configs = []string{""} // the hook's own lookup
	}
	for _, c := range configs {
		gc := *g
		checks = append(checks, gc.doctorConfig(ctx, flags, c, f, timeout)...)
	}
	return checks
}

// settingsFiles are the settings files of harness h the flags select.
func settingsFiles(h string, f DoctorFlags) []string {
	t := targets[h]
	var out []string
	add := func(project string, user bool) {
		p, err := settingsPath(t, project, user)
		if err != nil {
			return
		}
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	switch {
	case f.User:
		add("", true)
	case f.Project != "":
		add(f.Project, false)
	default:
		add(".", false)
		add("", true)
	}
	return out
}

// doctorHooks checks the installed hook entries and returns the worker
// configs they name.
func doctorHooks(ctx context.Context, hs []string, f DoctorFlags, timeout time.Duration) ([]doctorCheck, []string) {
	var (
		checks  []doctorCheck
		configs []string
		looked  []string
	)
	seenConfig := map[string]bool{}
	for _, h := range hs {
		t := targets[h]
		for _, path := range settingsFiles(h, f) {
			looked = append(looked, path)
			doc, _, err := readSettings(path)
			name := "hooks " + h
			if err != nil {
				checks = append(checks, checkFail(name, fmt.Sprintf("%s: %v", path, err), "make the file readable"))
				continue
			}
			if doc == nil {
				continue
			}
			cmds, err := harness.InstalledCommands(doc, harness.OwnsCommand(h))
			if err != nil {
				checks = append(checks, checkFail(name, fmt.Sprintf("%s: %v", path, err), "fix the file (it must be one JSON object), then run worker-agent install "+h+" again"))
				continue
			}
			if len(cmds) == 0 {
				continue
			}
			c := checkInstalled(ctx, h, t, path, cmds, timeout)
			checks = append(checks, c)
			for _, list := range cmds {
				for _, cmd := range list {
					inv, _ := harness.ParseHookCommand(h, cmd)
					if cfg, ok := inv.Flag("config"); ok && !seenConfig[cfg] {
						seenConfig[cfg] = true
						configs = append(configs, cfg)
					}
				}
			}
		}
	}
	if len(checks) == 0 {
		fix := "run worker-agent install " + strings.Join(hs, " (or ") + strings.Repeat(")", len(hs)-1) + " --config FILE"
		checks = append(checks, checkFail("hooks", "no writ hooks in "+strings.Join(looked, ", "), fix))
	}
	sort.Strings(configs)
	return checks, configs
}

// checkInstalled checks one settings file's writ entries.
func checkInstalled(ctx context.Context, h string, t target, path string, cmds map[string][]string, timeout time.Duration) doctorCheck {
	name := "hooks " + h
	reinstall := "run worker-agent install " + h + " again (with --project or --user as before)"
	var missing []string
	for _, ev := range t.events {
		if len(cmds[ev]) == 0 {
			missing = append(missing, ev)
		}
	}
	if len(missing) > 0 {
		return checkFail(name, fmt.Sprintf("%s: no writ hook for %s", path, strings.Join(missing, ", ")), reinstall)
	}
	distinct := map[string]bool{}
	for _, list := range cmds {
		for _, c := range list {
			distinct[c] = true
		}
	}
	var all []string
	for c := range distinct {
		all = append(all, c)
	}
	sort.Strings(all)
	for _, c := range all {
		inv, _ := harness.ParseHookCommand(h, c)
		if !inv.Wrapped {
			return checkFail(name, fmt.Sprintf("%s: the hook command %q runs the binary directly, so a missing or crashing binary lets calls run", path, c), reinstall+" to get the fail-closed wrapper")
		}
		if err := checkExecutable(inv.Binary); err != nil {
			return checkFail(name, fmt.Sprintf("%s: the hook runs %s: %v (every call is blocked)", path, inv.Binary, err), "reinstall worker-agent there, or "+reinstall+" from the worker-agent you want it to run")
		}
		if filepath.Base(inv.Binary) == HookClientName {
			// The thin client runs worker-agent beside it whenever the
			// sidecar does not take an event.
			agent := filepath.Join(filepath.Dir(inv.Binary), "worker-agent")
			if err := checkExecutable(agent); err != nil {
				return checkFail(name, fmt.Sprintf("%s: the hook runs %s, which needs %s beside it: %v (calls are blocked whenever the sidecar is not running)", path, inv.Binary, agent, err), "reinstall worker-agent beside writ-hook, or "+reinstall)
			}
		}
		if err := probeHook(ctx, c, timeout); err != nil {
			return checkFail(name, fmt.Sprintf("%s: the installed hook command does not answer a probe: %v", path, err), "run the command by hand to see why, then "+reinstall)
		}
	}
	detail := fmt.Sprintf("%s: %d events, fail-closed wrapper, %s answers", path, len(t.events), strings.Join(binaries(h, all), ", "))
	for _, c := range all {
		if inv, _ := harness.ParseHookCommand(h, c); filepath.Base(inv.Binary) == HookClientName {
			detail += "; " + sidecarHosting(ctx, inv.Args, timeout)
			break
		}
	}
	return checkOK(name, detail)
}

// sidecarHosting says whether the sidecar an installed writ-hook entry
// names (its --socket) runs hooks sent from this environment, by sending
// it the doctor's probe event as writ-hook would. A sidecar that declines
// is not a failure: writ-hook then runs worker-agent, slower, same answer.
func sidecarHosting(ctx context.Context, args []string, timeout time.Duration) string {
	var socket string
	for i, a := range args {
		if a == "--socket" && i+1 < len(args) {
			socket = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--socket="); ok {
			socket = v
		}
	}
	if socket == "" {
		return "writ-hook has no --socket, so every event starts worker-agent (run install again)"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Sprintf("no sidecar on %s: every event starts worker-agent until 'worker-agent run' serves it", socket)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	dir, _ := os.Getwd()
	rep, _, err := hookwire.Exchange(conn, hookwire.Request{V: hookwire.Version, Op: hookwire.OpRun, TimeoutMS: timeout.Milliseconds(),
		Body: &hookwire.Run{Args: args, Env: hookwire.Env(os.Environ()), Dir: dir, Stdin: []byte(doctorProbe)}}, nil)
	switch {
	case err != nil && !errors.Is(err, hookwire.ErrMalformed):
		return fmt.Sprintf("the sidecar on %s gave no answer to a hook (%v): is it an older build? every event starts worker-agent", socket, err)
	case err != nil || rep.Code != "" && rep.Code != hookwire.CodeDeclined:
		return fmt.Sprintf("the sidecar on %s does not run hooks (an older build?): every event starts worker-agent", socket)
	case rep.Code == hookwire.CodeDeclined:
		return fmt.Sprintf("the sidecar on %s declines hooks from this environment (%s): start it from the environment the harness runs hooks in, or every event starts worker-agent", socket, rep.Error)
	}
	return fmt.Sprintf("the sidecar on %s runs hooks from this environment", socket)
}

func binaries(h string, cmds []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cmds {
		inv, _ := harness.ParseHookCommand(h, c)
		if !seen[inv.Binary] {
			seen[inv.Binary] = true
			out = append(out, inv.Binary)
		}
	}
	return out
}

// probeHook runs an installed hook command as the harness would (/bin/sh
// -c, the event on stdin) with an event the hook answers without the
// issuer, and wants exit 0 and no output.
func probeHook(ctx context.Context, command string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Stdin = strings.NewReader(doctorProbe)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	line := harness.OneLine(errb.String())
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("no answer within %v", timeout)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("exit status %d: %s", ee.ExitCode(), line)
		}
		return err
	case out.Len() > 0:
		return fmt.Errorf("unexpected output %q", harness.OneLine(out.String()))
	}
	return nil
}

// doctorConfig checks one worker config ("" for the hook's own lookup),
// its credentials, NATS and the issuer.
func (g *Agent) doctorConfig(ctx context.Context, flags *pflag.FlagSet, path string, f DoctorFlags, timeout time.Duration) []doctorCheck {
	af := AdapterFlags{config: path, stateDir: f.StateDir}
	if path == "" && f.Project != "" {
		// The hook looks for the project's config in the session's
		// directory, the project.
		af.config = filepath.Join(f.Project, ProjectConfig)
		if _, err := os.Stat(af.config); err != nil {
			af.config = ""
		}
	}
	cfg, err := af.resolve(flags, g)
	if err != nil {
		return []doctorCheck{checkFail("config", err.Error(), configFix(af.config))}
	}
	var missing []string
	if cfg.Lane == "" {
		missing = append(missing, `"lane"`)
	}
	where := cfg.where()
	if cfg.path == "" {
		where = "no config file (" + ProjectConfig + " or " + filepath.Join(af.stateDir, "worker.json") + "), flags and environment only"
	}
	if len(missing) > 0 {
		return []doctorCheck{checkFail("config", fmt.Sprintf("%s: no %s for the main session: every main-session call is blocked", where, strings.Join(missing, ", ")), "add it to the config")}
	}
	checks := []doctorCheck{checkOK("config", fmt.Sprintf("%s: worker %s, lane %s", where, g.Worker, cfg.Lane))}

	cred := credentialsCheck(g)
	checks = append(checks, cred)
	if cred.Status != "ok" {
		return checks
	}
	return append(checks, g.connectivity(ctx, timeout)...)
}

func configFix(path string) string {
	if path == "" {
		return "create " + ProjectConfig + " in the project, or pass --config FILE (and install with --config FILE)"
	}
	return "fix " + path + " (see docs/harnesses.md, 'The worker config'), or install again with --config naming a good one"
}

// credentialsCheck checks the password file and the CA the connection
// will use.
func credentialsCheck(g *Agent) doctorCheck {
	var notes []string
	if g.Conn.User != "" {
		if g.Conn.PasswordFile == "" {
			return checkFail("credentials", fmt.Sprintf("NATS user %q but no password file", g.Conn.User), `set "nats_password_file" in the config`)
		}
		st, err := os.Stat(g.Conn.PasswordFile)
		if err != nil {
			return checkFail("credentials", fmt.Sprintf("password file %s: %v", g.Conn.PasswordFile, errors.Unwrap(err)), "create it (one line, the worker's NATS password) or fix nats_password_file")
		}
		if !st.Mode().IsRegular() {
			return checkFail("credentials", "password file "+g.Conn.PasswordFile+" is not a regular file", "point nats_password_file at the file holding the password")
		}
		b, err := os.ReadFile(g.Conn.PasswordFile)
		if err != nil {
			return checkFail("credentials", fmt.Sprintf("password file %s: %v", g.Conn.PasswordFile, errors.Unwrap(err)), "make it readable by the user the harness runs as (and nobody else)")
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return checkFail("credentials", "password file "+g.Conn.PasswordFile+" is empty", "write the worker's NATS password into it")
		}
		if st.Mode().Perm()&0o077 != 0 {
			return checkFail("credentials", fmt.Sprintf("password file %s has mode %04o: others can read the worker's password", g.Conn.PasswordFile, st.Mode().Perm()), "chmod 600 "+g.Conn.PasswordFile)
		}
		notes = append(notes, fmt.Sprintf("user %s, password file %s (mode %04o)", g.Conn.User, g.Conn.PasswordFile, st.Mode().Perm()))
	}
	if g.Conn.CredsFile != "" {
		st, err := os.Stat(g.Conn.CredsFile)
		if err != nil {
			return checkFail("credentials", fmt.Sprintf("credentials file %s: %v", g.Conn.CredsFile, errors.Unwrap(err)), "ask the operator for one (issuer auth mint --worker "+g.Worker+") or fix nats_creds")
		}
		name, err := connect.CredsName(g.Conn.CredsFile)
		if err != nil {
			return checkFail("credentials", strings.TrimPrefix(err.Error(), connect.ErrConnect.Error()+": "), "ask the operator for new ones: issuer auth mint --worker "+g.Worker)
		}
		if name != g.Worker {
			return checkFail("credentials", fmt.Sprintf("credentials file %s is for %q, not the worker %q: NATS lets it publish only under writ.api.%s.>", g.Conn.CredsFile, name, g.Worker, name), "use the worker's own credentials: issuer auth mint --worker "+g.Worker)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return checkFail("credentials", fmt.Sprintf("credentials file %s has mode %04o: others can read the worker's seed", g.Conn.CredsFile, st.Mode().Perm()), "chmod 600 "+g.Conn.CredsFile)
		}
		notes = append(notes, fmt.Sprintf("credentials file %s for %s (mode %04o)", g.Conn.CredsFile, name, st.Mode().Perm()))
	}
	if g.Conn.CAFile != "" {
		b, err := os.ReadFile(g.Conn.CAFile)
		if err != nil {
			return checkFail("credentials", fmt.Sprintf("CA file %s: %v", g.Conn.CAFile, errors.Unwrap(err)), "fix nats_ca (the CA certificate of the NATS server, PEM)")
		}
		if !hasCertificate(b) {
			return checkFail("credentials", "CA file "+g.Conn.CAFile+" holds no PEM certificate", "point nats_ca at the NATS server's CA certificate (PEM)")
		}
		notes = append(notes, "CA "+g.Conn.CAFile)
	}
	if len(notes) == 0 {
		return checkOK("credentials", "none configured (a NATS server without authentication, as in development)")
	}
	return checkOK("credentials", strings.Join(notes, "; "))
}

func hasCertificate(b []byte) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if blk.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(blk.Bytes); err == nil {
				return true
			}
		}
	}
}

// connectivity checks NATS, then the issuer behind it.
func (g *Agent) connectivity(ctx context.Context, timeout time.Duration) []doctorCheck {
	opts := g.Conn
	opts.Name = "worker-agent-doctor:" + g.Worker
	url := opts.URL
	nc, err := opts.Dial()
	if err != nil {
		return []doctorCheck{checkFail("nats", harness.OneLine(err.Error()), "start the issuer (issuer serve), or fix nats_url / --nats-url; check the credentials above")}
	}
	defer nc.Close()
	checks := []doctorCheck{checkOK("nats", "connected to "+nc.ConnectedUrlRedacted())}

	// A grant request without a lane: the issuer refuses it as
	// invalid_request before proposing anything, so nothing is recorded.
	subj := api.WorkerSubject(g.Worker, api.OpGrant)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		msg, err := nc.RequestWithContext(ctx, subj, []byte(fmt.Sprintf(`{"v":%d}`, api.Version)))
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return append(checks, checkFail("issuer", fmt.Sprintf("NATS at %s is up, but no issuer listens on %s", url, subj), "start the issuer on this NATS server (issuer serve), or point nats_url at the one it uses"))
		case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)):
			return append(checks, checkFail("issuer", fmt.Sprintf("no answer on %s within %v", subj, timeout), "check the issuer's health (issuer status) and its logs"))
		case err != nil && strings.Contains(strings.ToLower(err.Error()), "permission"):
			return append(checks, checkFail("issuer", fmt.Sprintf("NATS refused this connection the worker's subjects (%v)", err), fmt.Sprintf("the worker id (%s) must be a NATS user the issuer was configured with; fix \"worker\"/\"nats_user\" or the issuer's users", g.Worker)))
		case err != nil:
			return append(checks, checkFail("issuer", fmt.Sprintf("asking on %s: %v", subj, err), "check the issuer and NATS logs"))
		}
		env, derr := grants.DecodeEnvelope(msg.Data)
		if derr != nil {
			return append(checks, checkFail("issuer", fmt.Sprintf("the answer on %s is not a writ envelope: %v", subj, derr), "is another service answering writ's subjects? check the issuer's version"))
		}
		if env.Reason == grants.ReasonIssuerUnavail {
			// A follower, or a leader being elected: ask again.
			select {
			case <-ctx.Done():
				return append(checks, checkFail("issuer", "the issuer answered issuer_unavailable until the deadline (no leader?)", "check the cluster (issuer status)"))
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		return append(checks, checkOK("issuer", fmt.Sprintf("answered worker %s on %s", g.Worker, subj)))
	}
}

func checkOK(name, detail string) doctorCheck {
	return doctorCheck{Name: name, Status: "ok", Detail: detail}
}

func checkFail(name, detail, fix string) doctorCheck {
	return doctorCheck{Name: name, Status: "fail", Detail: detail, Fix: fix}
}

// reportChecks prints the report and returns exit 1 when a check failed.
func (g *Agent) reportChecks(checks []doctorCheck, asJSON bool) error {
	allOK := true
	for _, c := range checks {
		allOK = allOK && c.Status == "ok"
	}
	if asJSON {
		enc := json.NewEncoder(g.Stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			OK     bool          `json:"ok"`
			Checks []doctorCheck `json:"checks"`
		}{allOK, checks})
	} else {
		width := 0
		for _, c := range checks {
			width = max(width, len(c.Name))
		}
		for _, c := range checks {
			status := "ok  "
			line := c.Detail
			if c.Status != "ok" {
				status = "FAIL"
				line += " — fix: " + c.Fix
			}
			fmt.Fprintf(g.Stdout, "%s  %-*s  %s\n", status, width, c.Name, line)
		}
	}
	if !allOK {
		return &ExitError{Code: ExitDoctor}
	}
	return nil
}
