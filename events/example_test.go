package events_test

import (
	"fmt"

	"github.com/writ-dev/writ/events"
)

// A state machine appends each receipt to its chain; an auditor decodes the
// bytes, checks that each event follows the previous one and advances.
func ExampleChain_Append() {
	var issuer events.Chain
	var log [][]byte
	for _, e := range []events.Event{
		{Kind: events.KindPermit, GrantID: "g-1", Worker: "w1", Tool: "Read"},
		{Kind: events.KindAttempt, GrantID: "g-1", Worker: "w1", Tool: "Read"},
	} {
		log = append(log, issuer.Append(&e, nil))
	}

	var auditor events.Chain
	for _, b := range log {
		e, err := events.Decode(b)
		if err != nil {
			fmt.Println("decode:", err)
			return
		}
		if err := auditor.Check(e); err != nil {
			fmt.Println("chain:", err)
			return
		}
		auditor.Advance(e)
		fmt.Printf("seq %d %s grant %s on %s, first=%v\n", e.Seq, e.Kind, e.GrantID, events.Subject(e.Kind), e.Prev.IsZero())
	}
	fmt.Println("auditor head matches issuer:", auditor == issuer)

	// A byte changed in transit is caught by the hash.
	bad := append([]byte(nil), log[1]...)
	bad[len(bad)-40] ^= 1
	_, err := events.Decode(bad)
	fmt.Println(err != nil)
	// Output:
	// seq 1 permit grant g-1 on writ.evt.permit, first=true
	// seq 2 attempt grant g-1 on writ.evt.attempt, first=false
	// auditor head matches issuer: true
	// true
}
