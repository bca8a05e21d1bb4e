package connect

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/natsbus"
)

func TestInboxPrefixMatchesServerPermissions(t *testing.T) {
	if got, want := InboxPrefix("w1"), natsbus.InboxPrefix("w1"); got != want {
		t.Fatalf("client inbox prefix %q != server permission prefix %q", got, want)
	}
}

func TestDialErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"user without password file", Options{URL: "nats://127.0.0.1:1", User: "w1"}, "--nats-password-file"},
		{"missing password file", Options{URL: "nats://127.0.0.1:1", User: "w1", PasswordFile: filepath.Join(dir, "nope")}, "password file"},
		{"nothing listening", Options{URL: "nats://127.0.0.1:1"}, "issuer serve --dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.o.Dial()
			if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want ErrConnect mentioning %q, got %v", tc.want, err)
			}
		})
	}
	_ = os.Remove
}
