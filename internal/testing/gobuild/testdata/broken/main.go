// Package main does not compile, on purpose: the gobuild tests check that
// a failed build reports the compiler's own message.
package main

func main() {
	var n int = "not a number"
	_ = n
}
