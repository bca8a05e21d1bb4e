package args_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/args"
)

// TestFlattenArgs: scalars in canonical document order with JSON pointers;
// long strings elided to length and digest; formatting does not matter.
func TestFlattenArgs(t *testing.T) {
	long := strings.Repeat("x", args.MaxString+1)
	got, err := args.Flatten([]byte(`{"b":[1, "two", null], "a/~":{"c":true}, "n":1.50, "l":"` + long + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []args.Leaf{
		{Path: "/a~1~0/c", Kind: args.Bool, Value: "true"},
		{Path: "/b/0", Kind: args.Number, Value: "1"},
		{Path: "/b/1", Kind: args.String, Value: "two", Len: 3},
		{Path: "/b/2", Kind: args.Null},
		{Path: "/l", Kind: args.Elided, Value: "", Len: uint64(len(long))},
		{Path: "/n", Kind: args.Number, Value: "1.5"},
	}
	if !got.Carried || len(got.Leaves) != len(want) {
		t.Fatalf("Flatten = %+v", got)
	}
	for i := range want {
		g := got.Leaves[i]
		if want[i].Kind == args.Elided {
			if g.Kind != args.Elided || len(g.Value) != 64 || g.Len != want[i].Len {
				t.Errorf("leaf %d = %+v, want an elided value", i, g)
			}
			continue
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("leaf %d = %+v, want %+v", i, g, want[i])
		}
	}
	if u := got.Under("/b"); len(u) != 3 {
		t.Errorf("Under(/b) = %+v", u)
	}
	if u := got.Under("/a~1~0"); len(u) != 1 {
		t.Errorf("Under(/a~1~0) = %+v", u)
	}
	if u := got.Under("/b/1"); len(u) != 1 || u[0].Value != "two" {
		t.Errorf("Under(/b/1) = %+v", u)
	}
	if u := got.Under("/"); len(u) != 0 {
		t.Errorf("Under(/) = %+v", u)
	}
	scalar, _ := args.Flatten([]byte(`"hi"`))
	if len(scalar.Leaves) != 1 || scalar.Leaves[0].Path != "" {
		t.Errorf("scalar document: %+v", scalar)
	}
	empty, _ := args.Flatten([]byte(`{}`))
	if !empty.Carried || len(empty.Leaves) != 0 {
		t.Errorf("empty object: %+v", empty)
	}
	a, _ := args.Flatten([]byte(`{"x":1,"y":[true]}`))
	b, _ := args.Flatten([]byte(" { \"y\" : [ true ] , \"x\" : 1.0 } "))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("formatting changed the flattened form: %+v vs %+v", a, b)
	}
	if _, err := args.Flatten([]byte(`{"a":1,"a":2}`)); !errors.Is(err, args.ErrFlatten) {
		t.Errorf("duplicate keys: %v", err)
	}
	many := "[" + strings.TrimSuffix(strings.Repeat("1,", args.MaxLeaves+1), ",") + "]"
	if _, err := args.Flatten([]byte(many)); !errors.Is(err, args.ErrFlatten) || !errors.Is(err, args.ErrTooLarge) {
		t.Errorf("too many values: %v", err)
	}
}

// FuzzFlattenArgs: flattening never panics; whatever canonicalizes,
// flattens, and equivalent formattings flatten alike.
func FuzzFlattenArgs(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"d"}`, `[]`, `"x"`, `{"~/":1}`, `{"a":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := args.Flatten(raw)
		canon, cerr := args.CanonicalJSON(raw)
		if cerr != nil {
			if err == nil {
				t.Fatalf("flattened arguments that do not canonicalize")
			}
			return
		}
		if err != nil {
			if !errors.Is(err, args.ErrFlatten) {
				t.Fatalf("error %v does not wrap ErrFlatten", err)
			}
			return
		}
		b, err := args.Flatten(canon)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("canonical form flattens differently: %v", err)
		}
		for _, l := range a.Leaves {
			if l.Kind < args.String || l.Kind > args.Elided || len(l.Path) > args.MaxPath {
				t.Fatalf("bad leaf %+v", l)
			}
		}
	})
}
