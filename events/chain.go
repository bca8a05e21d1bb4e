package events

import "fmt"

// Chain is the head of a hash chain: the last sequence number and hash.
// The zero Chain is the empty chain; the first event has Seq 1 and a zero
// Prev.
type Chain struct {
	Seq  uint64 `json:"seq"`
	Head Hash   `json:"head"`
}

// Append links e after the chain head (setting Seq and Prev), seals it,
// advances the head and returns the encoding appended to buf.
func (c *Chain) Append(e *Event, buf []byte) []byte {
	e.Seq = c.Seq + 1
	e.Prev = c.Head
	out := e.Seal(buf)
	c.Seq, c.Head = e.Seq, e.Hash
	return out
}

// Check reports whether e is the next event of the chain: its Seq is one
// more than the head's and its Prev equals the head's hash. It does not
// advance the chain; call Advance after a successful Check.
func (c Chain) Check(e Event) error {
	if e.Seq != c.Seq+1 {
		return fmt.Errorf("%w: seq %d does not follow seq %d (want seq %d)", ErrChain, e.Seq, c.Seq, c.Seq+1)
	}
	if e.Prev != c.Head {
		return fmt.Errorf("%w: seq %d prev %s does not match hash %s of seq %d",
			ErrChain, e.Seq, e.Prev.Short(), c.Head.Short(), c.Seq)
	}
	return nil
}

// Advance moves the head to e.
func (c *Chain) Advance(e Event) { c.Seq, c.Head = e.Seq, e.Hash }
