package audit

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// positions returns the stream sequences 1..n.
func positions(n int) []uint64 {
	ss := make([]uint64, n)
	for i := range ss {
		ss[i] = uint64(i + 1)
	}
	return ss
}

// pipelined checks raw (with stream sequences ss) through a Verifier's
// Pipeline with the given number of workers. Every third message goes in
// with AddShared (raw is never modified afterwards), so both decodes meet
// in one batch.
func pipelined(t *testing.T, raw [][]byte, ss []uint64, opts Options, workers int) (*Verifier, *Violation) {
	t.Helper()
	v := NewVerifier(opts)
	p := v.Pipeline(workers)
	var addErr error
	for i, b := range raw {
		if i%3 == 2 {
			addErr = p.AddShared(b, ss[i])
		} else {
			addErr = p.Add(b, ss[i])
		}
		if addErr != nil {
			break
		}
	}
	err := p.Close()
	if addErr != nil && addErr != err {
		t.Fatalf("Add returned %v, Close %v", addErr, err)
	}
	if !errors.Is(p.Add(raw[0], 1), ErrPipelineClosed) && err == nil {
		t.Fatalf("Add after Close did not fail")
	}
	if err != nil {
		if got := asViolation(err); got == nil || got != v.Violation() {
			t.Fatalf("Close returned %v, the Verifier's violation is %v", err, v.Violation())
		}
	}
	return v, v.Violation()
}

// samePipelined checks that a Pipeline over raw ends exactly where the
// sequential Verifier seq ended: same violation (sequence, code, detail),
// same summary, same digest; with one worker, two, and more than cores.
func samePipelined(t *testing.T, raw [][]byte, ss []uint64, opts Options, seq *Verifier) {
	t.Helper()
	for _, workers := range []int{1, 2, 5} {
		v, got := pipelined(t, raw, ss, opts, workers)
		want := seq.Violation()
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("%d workers: pipelined violation %v, sequential %v", workers, got, want)
		}
		if g, w := v.Summary(), seq.Summary(); !reflect.DeepEqual(g, w) {
			t.Fatalf("%d workers: pipelined summary %+v, sequential %+v", workers, g, w)
		}
		if v.Digest() != seq.Digest() {
			t.Fatalf("%d workers: pipelined digest %s, sequential %s", workers, v.Digest().Short(), seq.Digest().Short())
		}
	}
}

func sequential(raw [][]byte, ss []uint64, opts Options) *Verifier {
	v := NewVerifier(opts)
	for i, b := range raw {
		if v.Add(b, ss[i]) != nil {
			break
		}
	}
	return v
}

// TestPipelineMatchesSequential runs long streams (several batches) of the
// real state machine through the Pipeline: the digest must be the issuer's
// and the sequential Verifier's, and a corruption at any position k (a
// flipped bit, a truncated message, a dropped, repeated or swapped
// message) must give the sequential path's violation, with nothing after
// it folded.
func TestPipelineMatchesSequential(t *testing.T) {
	m := workload(3, 900)
	raw := m.raw()
	if len(raw) < 3*pipeBatch {
		t.Fatalf("workload produced only %d events", len(raw))
	}
	ss := positions(len(raw))
	seq := sequential(raw, ss, Options{})
	if seq.Violation() != nil {
		t.Fatal(seq.Violation())
	}
	if seq.Digest() != m.s.Digest() {
		t.Fatal("sequential digest differs from the issuer's")
	}
	samePipelined(t, raw, ss, Options{}, seq)
	samePipelined(t, raw, ss, Options{NoProjection: true}, sequential(raw, ss, Options{NoProjection: true}))
	samePipelined(t, raw[100:], ss[100:], Options{From: 101}, sequential(raw[100:], ss[100:], Options{From: 101}))

	type corruption struct {
		name  string
		apply func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64)
	}
	corruptions := []corruption{
		{"flip a bit", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			raw[k] = slices.Clone(raw[k])
			raw[k][len(raw[k])/3] ^= 0x10
			return raw, ss
		}},
		{"truncate", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			raw[k] = raw[k][:len(raw[k])-1]
			return raw, ss
		}},
		{"drop, hole in the stream", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			return slices.Delete(raw, k, k+1), slices.Delete(ss, k, k+1)
		}},
		{"drop, republished", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			return slices.Delete(raw, k, k+1), ss[:len(ss)-1]
		}},
		{"repeat, no stream seqs", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			return slices.Insert(raw, k, raw[k]), make([]uint64, len(ss)+1)
		}},
		{"swap", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			raw[k], raw[k+1] = raw[k+1], raw[k]
			return raw, ss
		}},
		{"two bad messages, the first reported", func(raw [][]byte, ss []uint64, k int) ([][]byte, []uint64) {
			raw[k] = raw[k][:3]
			raw[k+1] = raw[k+1][:3]
			return raw, ss
		}},
	}
	for _, c := range corruptions {
		for _, k := range []int{0, 1, pipeBatch - 1, pipeBatch, pipeBatch + 1, len(raw) / 2, len(raw) - 2} {
			t.Run(fmt.Sprintf("%s at %d", c.name, k), func(t *testing.T) {
				bad, bss := c.apply(slices.Clone(raw), slices.Clone(ss), k)
				want := sequential(bad, bss, Options{})
				if want.Violation() == nil {
					t.Fatal("the sequential Verifier found nothing")
				}
				if at := want.Violation().Seq; at != uint64(k+1) && at != uint64(k+2) {
					t.Fatalf("sequential violation %v, not at the corruption", want.Violation())
				}
				samePipelined(t, bad, bss, Options{}, want)
			})
		}
	}
}

// TestPipelineReplay folds with fsm.Evolve alone (the bare replay) and
// stops at the first error: the state is the one before the bad message.
func TestPipelineReplay(t *testing.T) {
	m := workload(5, 700)
	raw := m.raw()
	replay := func(raw [][]byte, workers int) (*fsm.State, int, error) {
		shared := workers == 3 // one of the runs below hands the messages over for good
		s, n := fsm.New(), 0
		p := NewPipeline(workers, func(d *Decoded) error {
			if d.Err != nil {
				return d.Err
			}
			if err := fsm.EvolveRef(s, d.Event); err != nil {
				return err
			}
			n++
			return nil
		})
		for _, b := range raw {
			add := p.Add
			if shared {
				add = p.AddShared
			}
			if add(b, 0) != nil {
				break
			}
		}
		return s, n, p.Close()
	}
	for _, workers := range []int{0, 1, 3} {
		s, n, err := replay(raw, workers)
		if err != nil || n != len(raw) || s.Digest() != m.s.Digest() {
			t.Fatalf("%d workers: %d of %d folded, err %v, digest match %v", workers, n, len(raw), err, s.Digest() == m.s.Digest())
		}
		k := len(raw) / 2
		bad := slices.Clone(raw)
		bad[k] = slices.Clone(bad[k])
		bad[k][len(bad[k])-1] ^= 1 // the stored hash
		s, n, err = replay(bad, workers)
		if !errors.Is(err, events.ErrHashMismatch) || n != k {
			t.Fatalf("%d workers: err %v after %d folded, want a hash mismatch after %d", workers, err, n, k)
		}
		prefix := fsm.New()
		for _, b := range raw[:k] {
			e, _ := events.Decode(b)
			if err := fsm.Evolve(prefix, e); err != nil {
				t.Fatal(err)
			}
		}
		if s.Digest() != prefix.Digest() {
			t.Fatalf("%d workers: state after the error is not the state before the bad message", workers)
		}
	}
}

// TestPipelineEmpty: closing a pipeline that was given nothing.
func TestPipelineEmpty(t *testing.T) {
	v := NewVerifier(Options{})
	if err := v.Pipeline(0).Close(); err != nil || v.Events() != 0 {
		t.Fatalf("err %v, %d events", err, v.Events())
	}
}
