package gen

import (
	"bytes"
	"testing"
	"time"
)

func TestAuditPhaseOnASmallStream(t *testing.T) {
	r, err := Audit(5000, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Events < 5000 || !r.DigestMatches || !r.ReplayMatches || !r.VerifyPipeMatches || !r.ReplayPipeMatches ||
		r.VerifyPerSec <= 0 || r.ReplayPerSec <= 0 || r.VerifyPipePerSec <= 0 || r.ReplayPipePerSec <= 0 {
		t.Fatalf("%+v", r)
	}
}

func TestMemoryPhaseForgetsExpiredGrants(t *testing.T) {
	r, err := Memory(2000, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.GrantsInLiveState != 2000 || r.LiveAfterExpiry != 1 || r.IdemAfterExpiry != 1 || !r.RestoreMatches || r.SnapshotBytes == 0 {
		t.Fatalf("%+v", r)
	}
}

// TestContiguousKeepsEveryReceipt checks that the one-buffer copy of a
// stream holds the same receipts in the same order, each its own slice
// whose capacity ends at its length (so an append to one cannot overwrite
// the next).
func TestContiguousKeepsEveryReceipt(t *testing.T) {
	raw, _, _ := Stream(3000, 8, time.Second)
	got := Contiguous(raw)
	if len(got) != len(raw) {
		t.Fatalf("%d receipts, want %d", len(got), len(raw))
	}
	for i := range raw {
		if !bytes.Equal(got[i], raw[i]) {
			t.Fatalf("receipt %d differs", i)
		}
		if cap(got[i]) != len(got[i]) {
			t.Fatalf("receipt %d: cap %d > len %d", i, cap(got[i]), len(got[i]))
		}
	}
	if len(got) > 1 && &got[0][:1][0] == &raw[0][:1][0] {
		t.Fatal("Contiguous returned the original buffers")
	}
}
