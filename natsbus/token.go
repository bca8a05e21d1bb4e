package natsbus

import (
	"fmt"
	"strings"
)

// MaxTokenLen is the longest name ValidToken accepts.
const MaxTokenLen = 64

// ValidToken reports whether name can be used as a single NATS subject token
// (a worker, user or server name): 1 to MaxTokenLen characters, each a letter,
// a digit, '_' or '-'. It rejects '.', '*', '>', whitespace and everything
// else that would let the name span or match other subjects.
func ValidToken(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	if len(name) > MaxTokenLen {
		return fmt.Errorf("%w: %d bytes long, at most %d allowed", ErrInvalidToken, len(name), MaxTokenLen)
	}
	for i := 0; i < len(name); i++ {
		if !tokenByte(name[i]) {
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: A-Z a-z 0-9 _ -)", ErrInvalidToken, name, name[i], i)
		}
	}
	return nil
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// checkSubject reports whether subj is a well-formed NATS subject: non-empty
// dot-separated tokens without whitespace. With wildcards, a token may be
// '*' or, as the last token only, '>'; otherwise neither may appear.
func checkSubject(subj string, wildcards bool) error {
	if subj == "" {
		return fmt.Errorf("empty subject")
	}
	tokens := strings.Split(subj, ".")
	for i, tok := range tokens {
		if tok == "" {
			return fmt.Errorf("subject %q has an empty token", subj)
		}
		if strings.ContainsAny(tok, " \t\r\n\f\v") {
			return fmt.Errorf("subject %q contains whitespace", subj)
		}
		if strings.ContainsAny(tok, "*>") {
			switch {
			case !wildcards:
				return fmt.Errorf("subject %q contains a wildcard", subj)
			case tok == "*":
			case tok == ">" && i == len(tokens)-1:
			default:
				return fmt.Errorf("subject %q misuses a wildcard in token %q", subj, tok)
			}
		}
	}
	return nil
}
