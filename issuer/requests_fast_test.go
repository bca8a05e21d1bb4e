package issuer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
)

// api's fast decoders are held there to a reference strict decoding; here
// they are held to decodeStrict itself: whenever one succeeds,
// decodeStrict accepts the body too and decodes the same request, and
// whenever it declines, grantCommand, spendCommand and effectCommand
// answer exactly what they answer through decodeStrict alone.

// The reference commands: decodeStrict, then the same checks.

func grantCommandStrict(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.GrantRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	return grantRequestCommand(worker, &r)
}

func spendCommandStrict(worker string, data []byte) (fsm.Command, []byte, *requestError) {
	var r api.SpendRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, nil, err
	}
	return spendRequestCommand(worker, &r)
}

func effectCommandStrict(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.EffectRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	return effectRequestCommand(worker, &r)
}

// fastResult says which fast decoders took a body.
type fastResult struct{ grant, spend, effect bool }

// checkFast holds each fast decoder to decodeStrict on body, and each
// command builder to its strict reference.
func checkFast(t testing.TB, body []byte) fastResult {
	t.Helper()
	var res fastResult
	{
		var fast, strict api.GrantRequest
		res.grant = api.DecodeGrantFast(body, &fast)
		compareDecode(t, body, res.grant, &fast, &strict)
		c, e := grantCommand("w1", body)
		cs, es := grantCommandStrict("w1", body)
		// The grant id is random: the leader picks a new one per command.
		if (e == nil) != (es == nil) || e == nil && (c.GrantID == "" || cs.GrantID == "") {
			t.Fatalf("grant body %q: %+v, strict %+v", body, e, es)
		}
		c.GrantID, cs.GrantID = "", ""
		compareCommands(t, "grant", body, c, cs, nil, nil, e, es)
	}
	{
		var fast, strict api.SpendRequest
		res.spend = api.DecodeSpendFast(body, &fast)
		compareDecode(t, body, res.spend, &fast, &strict)
		c, canon, e := spendCommand("w1", body)
		cs, canons, es := spendCommandStrict("w1", body)
		compareCommands(t, "spend", body, c, cs, canon, canons, e, es)
	}
	{
		var fast, strict api.EffectRequest
		res.effect = api.DecodeEffectFast(body, &fast)
		compareDecode(t, body, res.effect, &fast, &strict)
		c, e := effectCommand("w1", body)
		cs, es := effectCommandStrict("w1", body)
		compareCommands(t, "effect", body, c, cs, nil, nil, e, es)
	}
	return res
}

// compareDecode: when the fast decoder took the body, decodeStrict accepts
// it and decodes the same request.
func compareDecode(t testing.TB, body []byte, ok bool, fast, strict any) {
	t.Helper()
	if !ok {
		return
	}
	if e := decodeStrict(body, strict); e != nil {
		t.Fatalf("%T: the fast path took %q, which decodeStrict refuses: %+v", fast, body, e)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%T body %q:\n fast   %#v\n strict %#v", fast, body, fast, strict)
	}
}

func compareCommands(t testing.TB, op string, body []byte, c, cs fsm.Command, canon, canons []byte, e, es *requestError) {
	t.Helper()
	if !reflect.DeepEqual(e, es) {
		t.Fatalf("%s body %q: refusal %+v, strict %+v", op, body, e, es)
	}
	if !reflect.DeepEqual(c, cs) || !reflect.DeepEqual(canon, canons) {
		t.Fatalf("%s body %q:\n command %#v %q\n strict  %#v %q", op, body, c, canon, cs, canons)
	}
}

// sentBodies are bodies as package api/client encodes them, each of which
// must take its fast path, with what the fast path must be: grant, spend
// or effect.
func sentBodies(t testing.TB) map[string][][]byte {
	t.Helper()
	enc := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	amount := uint64(99)
	out := map[string][][]byte{}
	for _, r := range []api.GrantRequest{
		{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k1"},
		{Lane: "payments", Session: "s-9", Tool: "pay", Args: json.RawMessage(`{"amount":99,"memo":"<a & b>"}`), TTLMillis: 5000,
			Sources: []string{"u1"}, IdempotencyKey: "k2", TargetLabel: "Zürich", Amount: &amount, Bytes: 3, Cwd: "/w", ResolvedTarget: "/w/x"},
		{Lane: "coordinator", Tool: "send_email", Args: json.RawMessage(`{"to":"a@b.c"}`), IdempotencyKey: "k3", Provenance: []api.FieldTrace{
			{Field: "/to", Covered: true, Matches: []api.TraceMatch{{Source: "u1", Transform: "raw", Whole: true}}}}},
	} {
		r.V = api.Version
		out["grant"] = append(out["grant"], enc(r.AppendJSON(nil)))
	}
	for _, r := range []api.SpendRequest{
		{GrantID: "g1", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k4"},
		{GrantID: "g1", Digest: strings.Repeat("cd", 32), IdempotencyKey: "k5"},
	} {
		r.V = api.Version
		out["spend"] = append(out["spend"], enc(r.AppendJSON(nil)))
	}
	effect := api.EffectRequest{V: api.Version, GrantID: "g1", Outcome: "confirmed", Verifier: "exit-code"}
	out["effect"] = [][]byte{effect.AppendJSON(nil)}
	return out
}

// TestFastCommandsMatchStrict: on bodies as the client sends them, every
// prefix of them and every one-byte change, and the bodies every decoder
// refuses, the commands built through the fast decoders are those built
// through decodeStrict alone.
func TestFastCommandsMatchStrict(t *testing.T) {
	for op, bodies := range sentBodies(t) {
		for _, body := range bodies {
			r := checkFast(t, body)
			if took := map[string]bool{"grant": r.grant, "spend": r.spend, "effect": r.effect}[op]; !took {
				t.Errorf("%s body %s, as the client sends it, left the fast path", op, body)
			}
			for i := range body {
				checkFast(t, body[:i])
				for _, c := range []byte{'"', '\\', '{', ',', ' ', 0, 0xff} {
					mut := append([]byte(nil), body...)
					mut[i] = c
					checkFast(t, mut)
				}
			}
		}
	}
	for _, body := range commonBad {
		if r := checkFast(t, []byte(body)); r != (fastResult{}) {
			t.Errorf("body %q took a fast path (%+v); every decoder refuses it", body, r)
		}
	}
	big := []byte(`{"v":1,"grant_id":"` + strings.Repeat("g", api.MaxBodyBytes) + `"}`)
	if r := checkFast(t, big); r != (fastResult{}) {
		t.Fatalf("oversize body took a fast path: %+v", r)
	}
}

// FuzzFastCommands holds the commands built through the fast decoders to
// those built through decodeStrict on arbitrary bodies.
func FuzzFastCommands(f *testing.F) {
	for _, bodies := range sentBodies(f) {
		for _, b := range bodies {
			f.Add(b)
		}
	}
	for _, b := range commonBad {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFast(t, body)
	})
}

// BenchmarkDecodeRequest compares decodeStrict with the fast decoders on
// the bodies of BenchmarkGrantCommand and BenchmarkSpendCommand (canonical
// args) and an effect body.
func BenchmarkDecodeRequest(b *testing.B) {
	grant := []byte(strings.Replace(benchGrantBody, "ARGS", benchArgs["canonical"], 1))
	spend := []byte(strings.Replace(benchSpendBody, "ARGS", benchArgs["canonical"], 1))
	effect := []byte(benchEffectBody)
	cases := []struct {
		name         string
		strict, fast func() bool
	}{
		{"grant",
			func() bool { var r api.GrantRequest; return decodeStrict(grant, &r) == nil },
			func() bool { var r api.GrantRequest; return api.DecodeGrantFast(grant, &r) }},
		{"spend",
			func() bool { var r api.SpendRequest; return decodeStrict(spend, &r) == nil },
			func() bool { var r api.SpendRequest; return api.DecodeSpendFast(spend, &r) }},
		{"effect",
			func() bool { var r api.EffectRequest; return decodeStrict(effect, &r) == nil },
			func() bool { var r api.EffectRequest; return api.DecodeEffectFast(effect, &r) }},
	}
	for _, c := range cases {
		for _, m := range []struct {
			name string
			f    func() bool
		}{{"strict", c.strict}, {"fast", c.fast}} {
			b.Run(c.name+"/"+m.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !m.f() {
						b.Fatal("not decoded")
					}
				}
			})
		}
	}
}

// BenchmarkCommandStrict is BenchmarkGrantCommand, BenchmarkSpendCommand
// and BenchmarkEffectCommand through decodeStrict alone: the commands as
// they cost without the fast decoders, for comparison in one run.
func BenchmarkCommandStrict(b *testing.B) {
	for _, kind := range []string{"canonical", "raw"} {
		grant := []byte(strings.Replace(benchGrantBody, "ARGS", benchArgs[kind], 1))
		spend := []byte(strings.Replace(benchSpendBody, "ARGS", benchArgs[kind], 1))
		b.Run("grant/"+kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, e := grantCommandStrict("w1", grant); e != nil {
					b.Fatal(e)
				}
			}
		})
		b.Run("spend/"+kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, e := spendCommandStrict("w1", spend); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
	effect := []byte(benchEffectBody)
	b.Run("effect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, e := effectCommandStrict("w1", effect); e != nil {
				b.Fatal(e)
			}
		}
	})
}
