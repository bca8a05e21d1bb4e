//go:build race

package events

// raceEnabled: the race detector changes escape analysis and allocation
// counts, so TestAllocs does not run under it.
const raceEnabled = true
