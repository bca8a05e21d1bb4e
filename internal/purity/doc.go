// Package purity holds no code: its tests check the module's structure.
//
//   - purity_test.go: the deterministic core (the state machine, the
//     receipt format, the request wire format and all they import) stays
//     free of I/O, clocks and randomness.
//   - layers_test.go: the layer table, which writ packages each package
//     may not import (directly or not), checked against `go list -deps`.
//   - homes_test.go: each wire name (stream, subject roots, review-id
//     prefix, content channels) is spelled in one package only.
package purity
