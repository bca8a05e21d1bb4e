package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Errors. Validation errors wrap ErrInvalid and name the field; target
// errors wrap ErrTargetMissing or ErrTargetAmbiguous.
var (
	// ErrInvalid: the document does not validate; the message names the
	// field (for example surfaces[3].target.canon).
	ErrInvalid = errors.New("policy: invalid")
	// ErrVersion: the document's version is not one this build reads (such
	// an error wraps ErrInvalid too).
	ErrVersion = errors.New("policy: unsupported version")
	// ErrTargetMissing: the call carries no value for the target field.
	ErrTargetMissing = errors.New("policy: target missing")
	// ErrTargetAmbiguous: the target value does not canonicalize to
	// exactly one canonical target.
	ErrTargetAmbiguous = errors.New("policy: target ambiguous")
)

// MaxProblems bounds how many problems a ValidationError lists.
const MaxProblems = 32

// ValidationError is every problem validation found in a document, each
// naming its field (lanes.a.ttl, surfaces[3].target.canon). It wraps
// ErrInvalid through its problems. With one problem its message is that
// problem's, "policy: invalid: field: what is wrong".
type ValidationError struct {
	Problems []error
	// More counts the problems found beyond MaxProblems.
	More int
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 && e.More == 0 {
		return e.Problems[0].Error()
	}
	return fmt.Sprintf("%s: %d problems: %s", ErrInvalid, len(e.Problems)+e.More, strings.Join(e.Lines(), "; "))
}

// Unwrap returns the problems, so that errors.Is finds ErrInvalid (and
// ErrVersion) through them.
func (e *ValidationError) Unwrap() []error { return e.Problems }

// Lines returns one "field: what is wrong" line per problem, without the
// "policy: invalid: " each problem's own message starts with, and a last
// line counting those left out.
func (e *ValidationError) Lines() []string {
	out := make([]string, 0, len(e.Problems)+1)
	for _, p := range e.Problems {
		out = append(out, ProblemText(p))
	}
	if e.More > 0 {
		out = append(out, fmt.Sprintf("(and %d more)", e.More))
	}
	return out
}

// ProblemText is a validation error's message without its leading
// "policy: invalid: ".
func ProblemText(err error) string {
	return strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
}

// problems collects validation errors; err returns nil, the one error, or
// a ValidationError listing them.
type problems struct {
	list []error
	more int
}

func (ps *problems) add(err error) {
	if err == nil {
		return
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			ps.add(p)
		}
		ps.more += ve.More
		return
	}
	if len(ps.list) >= MaxProblems {
		ps.more++
		return
	}
	ps.list = append(ps.list, err)
}

func (ps *problems) err() error {
	switch {
	case len(ps.list) == 0:
		return nil
	case len(ps.list) == 1 && ps.more == 0:
		return ps.list[0]
	}
	return &ValidationError{Problems: ps.list, More: ps.more}
}
