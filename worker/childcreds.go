package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/writ-dev/writ/grants"
)

// NATS credentials of spawned children (operator mode). The parent
// generates the child's user key pair and names only the public key in
// the spawn; the issuer answers with a user JWT signed for that key
// (grants.Envelope.UserJWT), and the parent writes the child's .creds
// file from the JWT and the seed it kept. The seed never leaves this
// machine.

// NewChildKey generates a child's NATS user key pair: its seed and its
// public key (for api.SpawnRequest.UserKey).
func NewChildKey() (seed []byte, pub string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("generating the child's NATS user key: %w", err)
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, "", err
	}
	if pub, err = kp.PublicKey(); err != nil {
		return nil, "", err
	}
	return seed, pub, nil
}

// childKeyFromSeed returns a user seed and its public key.
func childKeyFromSeed(seed []byte) ([]byte, string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, "", fmt.Errorf("the child's NATS user seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, "", fmt.Errorf("the child's NATS user seed is not a user seed: %v", err)
	}
	return seed, pub, nil
}

// ChildCreds is the .creds file of a spawned child: the user JWT of the
// spawn's answer with the seed whose public key the spawn named. It fails,
// with the issuer's note, when the answer carries no JWT, and refuses a
// JWT that is not for that key or not for the child.
func ChildCreds(env grants.Envelope, seed []byte) ([]byte, error) {
	if env.UserJWT == "" {
		note := env.CredentialNote
		if note == "" {
			note = "the issuer signed no NATS credential"
		}
		return nil, fmt.Errorf("child %s has no NATS credential: %s", env.Worker, note)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	uc, err := jwt.DecodeUserClaims(env.UserJWT)
	switch {
	case err != nil:
		return nil, fmt.Errorf("child %s: the issuer's user JWT does not decode: %v", env.Worker, err)
	case uc.Subject != pub:
		return nil, fmt.Errorf("child %s: the issuer's user JWT is for %s, not for the key this spawn named (%s)", env.Worker, uc.Subject, pub)
	case uc.Name != env.Worker:
		return nil, fmt.Errorf("child %s: the issuer's user JWT names %q", env.Worker, uc.Name)
	}
	return jwt.FormatUserConfig(env.UserJWT, seed)
}

// WriteChildCreds writes a child's .creds file (ChildCreds) to path, mode
// 0600, refusing to replace a file.
func WriteChildCreds(path string, env grants.Envelope, seed []byte) error {
	b, err := ChildCreds(env, seed)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists: the child's credential is written to a new file", path)
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// childCredsDir makes a private directory (0700) for a child's .creds
// file under dir (the temporary directory when empty).
func childCredsDir(dir, child string) (string, error) {
	d, err := os.MkdirTemp(dir, "writ-child-"+child+"-")
	if err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o700)
}

// ChildCredsFile writes a child's .creds file in a new private directory
// and returns its path and a function removing the directory.
func ChildCredsFile(env grants.Envelope, seed []byte) (string, func(), error) {
	d, err := childCredsDir("", env.Worker)
	if err != nil {
		return "", func() {}, err
	}
	cleanup := func() { _ = os.RemoveAll(d) }
	path := filepath.Join(d, "child.creds")
	if err := WriteChildCreds(path, env, seed); err != nil {
		cleanup()
		return "", func() {}, err
	}
	return path, cleanup, nil
}
