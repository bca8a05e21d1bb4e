package issuer

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// One short reading of the stream is not loss: a stream leader that has not
// yet learned it was deposed answers from its own copy, which may be
// shorter. Loss is declared when readings stay short for lossConfirm, and
// a complete reading in between starts the count again.
func TestStreamLossNeedsShortReadingsOverTime(t *testing.T) {
	s := &Service{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t0 := time.Unix(1000, 0)
	lost := func() (uint64, uint64) { return s.lostFrom, s.lostThrough }

	// A stale answer of an empty stream, then the truth.
	s.noteStreamReading(0, 121, t0)
	if from, through := lost(); from != 0 {
		t.Fatalf("one short reading declared loss %d..%d", from, through)
	}
	s.noteStreamReading(121, 121, t0.Add(100*time.Millisecond))
	if s.short.pending() || s.lostFrom != 0 {
		t.Fatalf("a complete reading left loss suspected: %+v lost %d", s.short, s.lostFrom)
	}

	// Short readings spread over less than lossConfirm: not yet.
	at := t0.Add(time.Second)
	for i := range 20 {
		s.noteStreamReading(0, 121, at.Add(time.Duration(i)*(lossConfirm-time.Millisecond)/19))
	}
	if from, _ := lost(); from != 0 {
		t.Fatalf("short readings over less than %v declared loss from %d", lossConfirm, from)
	}
	// A complete reading resets; then two readings lossConfirm apart are
	// still too few.
	s.noteStreamReading(130, 121, at.Add(lossConfirm))
	s.noteStreamReading(5, 121, at.Add(lossConfirm+time.Second))
	s.noteStreamReading(5, 121, at.Add(2*lossConfirm+time.Second))
	if from, _ := lost(); from != 0 {
		t.Fatalf("two short readings declared loss from %d", from)
	}
	// The third, still short, confirms: receipts 6..121 are lost.
	s.noteStreamReading(5, 121, at.Add(2*lossConfirm+2*time.Second))
	if from, through := lost(); from != 6 || through != 121 {
		t.Fatalf("lost %d..%d after short readings over %v, want 6..121", from, through, lossConfirm+time.Second)
	}
	if !s.short.pending() {
		t.Fatal("declared loss stopped being followed")
	}
	// A restored stream clears it.
	s.noteStreamReading(121, 121, at.Add(3*lossConfirm))
	if from, _ := lost(); from != 0 || s.short.pending() {
		t.Fatalf("a complete stream still reported lost from %d", from)
	}
}
