package gen

import "testing"

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
