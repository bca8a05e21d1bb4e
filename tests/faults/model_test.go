package faults

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestAuthorityModelCatchesViolations checks the checker: histories that
// break single-spend, or let a spend beat an acknowledged revocation or
// epoch bump, must not pass; legal ones (including unknown outcomes) must.
func TestAuthorityModelCatchesViolations(t *testing.T) {
	const inf = math.MaxInt64
	grant := func(call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: modelIn{Kind: opGrant, Grant: 1, Worker: "w", Key: "g"}, Output: modelOut{OK: true}, Call: call, Return: ret}
	}
	spend := func(id int, key string, call, ret int64, res spendResult) porcupine.Operation {
		return porcupine.Operation{ClientId: id, Input: modelIn{Kind: opSpend, Grant: 1, Worker: "w", Key: key}, Output: modelOut{Result: res}, Call: call, Return: ret}
	}
	global := func(kind opKind, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 9, Input: modelIn{Kind: kind, Worker: "w"}, Output: modelOut{OK: ret != inf}, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"one winner, one loser", []porcupine.Operation{grant(0, 1), spend(2, "a", 2, 10, resAttempt), spend(3, "b", 3, 9, resAlready)}, porcupine.Ok},
		{"two winners", []porcupine.Operation{grant(0, 1), spend(2, "a", 2, 10, resAttempt), spend(3, "b", 3, 9, resAttempt)}, porcupine.Illegal},
		{"retry of the winner", []porcupine.Operation{grant(0, 1), spend(2, "a", 2, 3, resAttempt), spend(3, "a", 4, 5, resAttempt)}, porcupine.Ok},
		{"spend after an acknowledged revocation", []porcupine.Operation{grant(0, 1), global(opRevoke, 2, 3), spend(2, "a", 4, 5, resAttempt)}, porcupine.Illegal},
		{"spend after an acknowledged epoch bump", []porcupine.Operation{grant(0, 1), global(opEpoch, 2, 3), spend(2, "a", 4, 5, resAttempt)}, porcupine.Illegal},
		{"refused revoked before any revocation", []porcupine.Operation{grant(0, 1), spend(2, "a", 2, 3, resRevoked), global(opRevoke, 4, 5)}, porcupine.Illegal},
		{"revocation concurrent with a spend", []porcupine.Operation{grant(0, 1), global(opRevoke, 2, 6), spend(2, "a", 3, 5, resAttempt)}, porcupine.Ok},
		{"unknown revocation may come after", []porcupine.Operation{grant(0, 1), global(opRevoke, 2, inf), spend(2, "a", 4, 5, resAttempt)}, porcupine.Ok},
		{"unknown spend may have won", []porcupine.Operation{grant(0, 1), spend(2, "a", 2, inf, resUnknown), spend(3, "b", 3, 9, resAlready)}, porcupine.Ok},
		{"epoch bump before the grant does not stale it", []porcupine.Operation{global(opEpoch, 0, 1), grant(2, 3), spend(2, "a", 4, 5, resAttempt)}, porcupine.Ok},
		{"stale refusal for a grant minted after the bump", []porcupine.Operation{global(opEpoch, 0, 1), grant(2, 3), spend(2, "a", 4, 5, resStale)}, porcupine.Illegal},
		{"revoked wins over stale", []porcupine.Operation{grant(0, 1), global(opEpoch, 2, 3), global(opRevoke, 4, 5), spend(2, "a", 6, 7, resStale)}, porcupine.Illegal},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperationsTimeout(authorityModel, tc.h, 5*time.Second); got != tc.want {
			t.Errorf("%s: porcupine says %s, want %s", tc.name, got, tc.want)
		}
	}
}
