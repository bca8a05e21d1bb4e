package worker

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/natsauth"
)

// A child's .creds file pairs the issuer's JWT with the seed its parent
// kept, only when the JWT is for that key and that child; an answer
// without a JWT gives no file, with the issuer's note.
func TestChildCreds(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsauth.Init(dir, natsauth.DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	a, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed, pub, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.SignWorkerKey("w1-a", pub, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != nil {
		t.Fatal("a credential signed for another's key carries a seed")
	}
	env := grants.Envelope{Decision: grants.Permit, Worker: "w1-a", UserJWT: c.JWT}
	path := filepath.Join(dir, "child.creds")
	if err := WriteChildCreds(path, env, seed); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("creds file: %v %v", st, err)
	}
	raw, _ := os.ReadFile(path)
	if tok, err := jwt.ParseDecoratedJWT(raw); err != nil || tok != c.JWT {
		t.Fatalf("creds file JWT: %v", err)
	}
	if kp, err := jwt.ParseDecoratedNKey(raw); err != nil {
		t.Fatal(err)
	} else if p, _ := kp.PublicKey(); p != pub {
		t.Fatalf("creds file key %s, want %s", p, pub)
	}
	if err := WriteChildCreds(path, env, seed); err == nil {
		t.Fatal("replaced an existing creds file")
	}

	other, _, _ := NewChildKey()
	for name, tc := range map[string]struct {
		env  grants.Envelope
		seed []byte
		want string
	}{
		"no JWT":       {grants.Envelope{Worker: "w1-a", CredentialNote: "no NATS credential signed: because"}, seed, "because"},
		"another key":  {env, other, "not for the key"},
		"another name": {grants.Envelope{Worker: "w1-b", UserJWT: c.JWT}, seed, `names "w1-a"`},
		"garbage":      {grants.Envelope{Worker: "w1-a", UserJWT: "x.y.z"}, seed, "does not decode"},
	} {
		if _, err := ChildCreds(tc.env, tc.seed); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// Concurrent hook processes of one subagent end up with one key pair.
func TestSubagentKeyShared(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, pub, err := subagentKey(dir, "w1-sa-0123456789")
			if err != nil {
				t.Error(err)
			}
			keys[i] = pub
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] || k == "" {
			t.Fatalf("keys differ: %v", keys)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "fleet", "w1-sa-0123456789.nk"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v %v", st, err)
	}
}
