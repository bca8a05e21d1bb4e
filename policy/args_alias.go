package policy

import "github.com/writ-dev/writ/args"

// Names for the flattened arguments of package args, kept because the
// state machine's command codec and its tests spell them through this
// package. New code uses package args.
type (
	// Args is args.Flat.
	Args = args.Flat
	// Arg is args.Leaf.
	Arg = args.Leaf
	// ArgKind is args.Kind.
	ArgKind = args.Kind
)

// Argument kinds and the leaf limit, as args names them.
const (
	ArgString    = args.String
	ArgNumber    = args.Number
	ArgBool      = args.Bool
	ArgNull      = args.Null
	ArgElided    = args.Elided
	MaxArgLeaves = args.MaxLeaves
)

// FlattenArgs is args.Flatten.
func FlattenArgs(raw []byte) (Args, error) { return args.Flatten(raw) }
