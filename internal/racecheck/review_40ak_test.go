package racecheck

import "testing"

// zeroHandle is a store handle of no size: a store whose every call
// opens its storage anew (a DSN or a file path held in a package
// variable, say), so that each new(zeroHandle) is a second open, as the
// kits ask Stores.Other to be.
type zeroHandle struct{}

// TestReview40ak_SameZeroSizeHandlesOfTwoOpens: Same (same.go:20-21)
// compares pointers, and Go gives every allocation of size zero the same
// address (runtime.zerobase): two distinct handles new(zeroHandle) read as
// "one handle given twice", and reboottest.Contract
// (contract.go:64), remediationtest.Contract (remediationtest.go:148,151)
// and plantest (plantest.go:114) fail an honest store with "Stores.Other
// is Stores.Hosts given again". Same's doc: "Handles of other kinds
// (values such as a struct naming a directory, which may be a second open
// each call) are never Same" — a pointer to a zero-size handle is that
// case too.
func TestReview40ak_SameZeroSizeHandlesOfTwoOpens(t *testing.T) {
	a, b := new(zeroHandle), new(zeroHandle)
	if Same(a, b) {
		t.Errorf("Same(new(zeroHandle), new(zeroHandle)) = true: two handles made by two calls (two opens) read as one handle given twice; the kits fail an honest store")
	}
}
