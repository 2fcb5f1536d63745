package redfish

import (
	"fmt"
	"testing"
	"time"
)

// TestLostRegistryBoundedKeepsOpenWindows: a full registry first drops
// the entries whose window ended (no floor for them); only if it is
// still full does it drop the open window that ends first, and then
// every system without an entry counts as inside it (the floor) until it
// ends, never a moment less.
func TestLostRegistryBoundedKeepsOpenWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := lostRegistry{max: 4}
	for i := 0; i < 4; i++ { // windows that end at t0 + 1 min
		r.note(fmt.Sprint("old", i), t0, t0.Add(time.Minute))
	}
	at := t0.Add(2 * time.Minute)
	r.note("a", at, at.Add(10*time.Minute))
	if got := r.last("old0"); !got.at.IsZero() {
		t.Fatalf("expired windows dropped without a floor, got %+v for a dropped key", got)
	}
	for i := 0; i < 3; i++ {
		r.note(fmt.Sprint("b", i), at.Add(time.Second), at.Add(20*time.Minute))
	}
	if len(r.m) != 4 || !r.floor.at.IsZero() {
		t.Fatalf("a full registry of open windows: %d entries, floor %+v", len(r.m), r.floor)
	}
	r.note("c", at.Add(2*time.Second), at.Add(30*time.Minute))
	if len(r.m) != 4 {
		t.Fatalf("bounded at 4, holds %d", len(r.m))
	}
	// "a" (the window ending first) was dropped: it and every other key
	// without an entry is inside the floor until its window's end.
	for _, k := range []string{"a", "never-seen"} {
		if e := r.last(k); !e.at.Equal(at) || !e.until.Equal(at.Add(10*time.Minute)) {
			t.Fatalf("key %s after dropping an open window: %+v, want the dropped window", k, e)
		}
	}
	if e := r.last("c"); !e.until.Equal(at.Add(30 * time.Minute)) {
		t.Fatalf("the new entry: %+v", e)
	}
}
