package natsbus

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// operatorAuth builds an operator, a system account and one more account.
func operatorAuth(t *testing.T) OperatorAuth {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	sys, _ := nkeys.CreateAccount()
	sysPub, _ := sys.PublicKey()
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	sysJWT, _ := jwt.NewAccountClaims(sysPub).Encode(op)
	accJWT, _ := jwt.NewAccountClaims(accPub).Encode(op)
	return OperatorAuth{OperatorJWT: opJWT, SystemAccount: sysPub, Accounts: []string{sysJWT, accJWT}, ResolverDir: t.TempDir()}
}

func TestValidateOperatorMode(t *testing.T) {
	other := operatorAuth(t)
	for _, tc := range []struct {
		name   string
		mutate func(c *ServerConfig)
		field  string
	}{
		{"ok", func(*ServerConfig) {}, ""},
		{"with static users", func(c *ServerConfig) { c.Users = []User{WorkerUser("w1", "p")} }, "Operator"},
		{"not an operator JWT", func(c *ServerConfig) { c.Operator.OperatorJWT = c.Operator.Accounts[0] }, "Operator.OperatorJWT"},
		{"bad system account", func(c *ServerConfig) { c.Operator.SystemAccount = "nope" }, "Operator.SystemAccount"},
		{"system account of another operator", func(c *ServerConfig) { c.Operator.SystemAccount = other.SystemAccount }, "Operator.SystemAccount"},
		{"no resolver dir", func(c *ServerConfig) { c.Operator.ResolverDir = " " }, "Operator.ResolverDir"},
		{"account of another operator", func(c *ServerConfig) { c.Operator.Accounts = append(c.Operator.Accounts, other.Accounts[1]) }, "Operator.Accounts[2]"},
		{"system account JWT missing", func(c *ServerConfig) { c.Operator.Accounts = c.Operator.Accounts[1:] }, "Operator.Accounts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultServerConfig()
			cfg.StoreDir = t.TempDir()
			op := operatorAuth(t)
			cfg.Operator = &op
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), ": "+tc.field+":") {
				t.Fatalf("want ErrInvalidConfig naming %s, got %v", tc.field, err)
			}
		})
	}
}
