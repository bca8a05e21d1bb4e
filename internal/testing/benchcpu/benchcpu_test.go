package benchcpu

import "testing"

// TestProcessAdvancesWithWork: burning CPU moves the process clock
// forward, so a Meter around real work reports a positive figure.
func TestProcessAdvancesWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("process CPU time %v: the system reports none", before)
	}
	x := uint64(1)
	for after := Process(); after == before; after = Process() {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 {
		t.Log("unreachable; keeps the loop from being optimized away")
	}
}
