// Package purity holds no code: its tests check that the deterministic core
// (the state machine and the packages it builds on) stays free of I/O,
// clocks and randomness. See purity_test.go.
package purity
