package hookwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeReply(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Reply
		ok   bool
	}{
		{`{"started":true}`, Reply{Started: true}, true},
		{`{"hook":{"stdout":"eyJ4IjoxfQ==","stderr":"n\n","exit":2}}`, Reply{Hook: &Answer{Stdout: []byte(`{"x":1}`), Stderr: "n\n", Exit: 2}}, true},
		{`{"hook":{"exit":0}}`, Reply{Hook: &Answer{}}, true},
		{`{"code":"declined","error":"why"}`, Reply{Code: CodeDeclined, Error: "why"}, true},
		{`{}`, Reply{}, false},
		{`{"started":false}`, Reply{}, false},
		{`{"started":true,"hook":{"exit":0}}`, Reply{}, false},
		{`{"hook":{"exit":0},"code":"x"}`, Reply{}, false},
		{`{"hook":{"exit":256}}`, Reply{}, false},
		{`{"hook":{"exit":-1}}`, Reply{}, false},
		{`{"hook":null}`, Reply{}, false},
		{`[1]`, Reply{}, false},
		{``, Reply{}, false},
	} {
		got, err := DecodeReply([]byte(tc.line))
		if tc.ok != (err == nil) || tc.ok && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v ok=%v", tc.line, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is not ErrMalformed", tc.line, err)
		}
	}
}

func TestDecodeRun(t *testing.T) {
	good := `{"args":["hook","codex"],"env":{"WRIT_X":"1","HOME":"/h"},"dir":"/w","stdin":"e30="}`
	r, err := DecodeRun([]byte(good))
	if err != nil || string(r.Stdin) != "{}" || r.Dir != "/w" || r.Env["HOME"] != "/h" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{
		`{"args":["request","x"],"dir":"/w"}`,
		`{"args":["hook"],"dir":"/w"}`,
		`{"args":["hook","codex"],"dir":"w"}`,
		`{"args":["hook","codex"],"dir":""}`,
		`{"args":["hook","codex"],"dir":"/w","env":{"PATH":"/bin"}}`,
		`{"args":["hook","codex"],"dir":"/w","stdin":"!"}`,
		`null`, `[]`, ``,
	} {
		if _, err := DecodeRun([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", bad, err)
		}
	}
	big, _ := json.Marshal(Run{Args: []string{"hook", "codex"}, Dir: "/w", Stdin: make([]byte, MaxStdin+1)})
	if _, err := DecodeRun(big); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized stdin: %v", err)
	}
}

func TestEnv(t *testing.T) {
	got := Env([]string{"WRIT_A=1", "PATH=/bin", "WRIT_A=2", "NATS_URL=n", "HOME=/h", "TMPDIR=", "XDG_STATE_HOME=/s", "WRITX=1", "junk"})
	want := map[string]string{"WRIT_A": "1", "NATS_URL": "n", "HOME": "/h", "TMPDIR": "", "XDG_STATE_HOME": "/s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if d := EnvDiff(want, map[string]string{"WRIT_A": "1", "NATS_URL": "m", "HOME": "/h", "TMPDIR": "", "XDG_STATE_HOME": "/s", "WRIT_B": ""}); strings.Join(d, ",") != "NATS_URL,WRIT_B" {
		t.Fatalf("diff %v", d)
	}
	if d := EnvDiff(want, want); d != nil {
		t.Fatalf("diff of equal: %v", d)
	}
	// Set to empty differs from unset.
	if d := EnvDiff(map[string]string{"WRIT_A": ""}, map[string]string{}); len(d) != 1 {
		t.Fatalf("diff %v", d)
	}
}

// FuzzDecodeReply: never panics; a reply it accepts reads back the same
// after encoding.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{`{"started":true}`, `{"hook":{"stdout":"eA==","exit":2}}`, `{"code":"declined"}`, `{"hook":{"exit":1e3}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := DecodeReply([]byte(s))
		if err != nil {
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeReply(b)
		if err != nil || !reflect.DeepEqual(normal(again), normal(r)) {
			t.Fatalf("%s -> %s -> %+v, %v", s, b, again, err)
		}
	})
}

// normal treats an empty and a nil stdout alike (omitempty drops both).
func normal(r Reply) Reply {
	if r.Hook != nil && len(r.Hook.Stdout) == 0 {
		h := *r.Hook
		h.Stdout = nil
		r.Hook = &h
	}
	return r
}

// FuzzDecodeRun: never panics; a body it accepts names a hook command,
// an absolute directory and only variables writ reads.
func FuzzDecodeRun(f *testing.F) {
	f.Add(`{"args":["hook","codex"],"env":{"WRIT_X":"1"},"dir":"/w","stdin":"e30="}`)
	f.Add(`{"args":["hook"],"dir":"/"}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := DecodeRun([]byte(s))
		if err != nil {
			return
		}
		if len(r.Args) < 2 || r.Args[0] != "hook" || !strings.HasPrefix(r.Dir, "/") || len(r.Stdin) > MaxStdin {
			t.Fatalf("accepted %+v", r)
		}
		for k := range r.Env {
			if !Relevant(k) {
				t.Fatalf("accepted env %q", k)
			}
		}
	})
}

// Exchange reports Started as it stood when the exchange ended: the line
// that decides whether a client may still run the hook itself.
func TestExchange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies string
		started bool
		hook    bool
		code    string
		err     error // nil, ErrMalformed, or io.EOF
	}{
		{"answer", `{"started":true}` + "\n" + `{"hook":{"exit":0}}` + "\n", true, true, "", nil},
		{"answer without started", `{"hook":{"exit":2,"stderr":"x"}}` + "\n", false, true, "", nil},
		{"declined", `{"code":"declined","error":"env"}` + "\n", false, false, CodeDeclined, nil},
		{"code after started", `{"started":true}` + "\n" + `{"code":"unavailable"}` + "\n", true, false, "unavailable", nil},
		{"gone before started", ``, false, false, "", io.EOF},
		{"gone after started", `{"started":true}` + "\n", true, false, "", io.EOF},
		{"unreadable after started", `{"started":true}` + "\n{}\n", true, false, "", ErrMalformed},
		{"unterminated answer", `{"hook":{"exit":0}}`, false, false, "", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := &fakeConn{in: strings.NewReader(tc.replies)}
			calls := 0
			rep, started, err := Exchange(rw, Request{V: Version, Op: OpRun, Body: &Run{Args: []string{"hook", "codex"}, Dir: "/"}}, func() { calls++ })
			if calls != map[bool]int{false: 0, true: 1}[tc.started] {
				t.Fatalf("onStarted called %d times", calls)
			}
			if started != tc.started || (rep.Hook != nil) != tc.hook || rep.Code != tc.code || !errors.Is(err, tc.err) && err != tc.err {
				t.Fatalf("got %+v started=%v err=%v", rep, started, err)
			}
			var req Request
			if err := json.Unmarshal(rw.out.Bytes(), &req); err != nil || req.Op != OpRun || !strings.HasSuffix(rw.out.String(), "\n") {
				t.Fatalf("request line %q: %v", rw.out.String(), err)
			}
		})
	}
}

type fakeConn struct {
	in  io.Reader
	out bytes.Buffer
}

func (f *fakeConn) Read(p []byte) (int, error)  { return f.in.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error) { return f.out.Write(p) }
