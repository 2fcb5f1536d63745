package redfish

import (
	"fmt"
	"testing"
	"time"
)

// TestLostRegistryBoundedKeepsOpenWindows: a full registry first drops
// the entries whose windows ended (no floor for them); only if it is
// still full does it drop the open entry that ends first, and then
// every system without an entry counts as inside it (the floor) until it
// ends, never a moment less; a system given an entry meanwhile keeps it.
func TestLostRegistryBoundedKeepsOpenWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := windowRegistry{max: 4}
	for i := 0; i < 4; i++ { // windows that end at t0 + 1 min
		r.note(fmt.Sprint("old", i), t0, t0.Add(time.Minute))
	}
	at := t0.Add(2 * time.Minute)
	r.note("a", at, at.Add(10*time.Minute))
	if got := r.get("old0"); !got.lost.at.IsZero() {
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
		if e := r.get(k).lost; !e.at.Equal(at) || !e.until.Equal(at.Add(10*time.Minute)) {
			t.Fatalf("key %s after dropping an open window: %+v, want the dropped window", k, e)
		}
	}
	if e := r.get("c").lost; !e.until.Equal(at.Add(30 * time.Minute)) {
		t.Fatalf("the new entry: %+v", e)
	}
	// "a" gets an entry again (an answered reset) while the floor is
	// open (making room drops another open entry into the floor): it is
	// still inside the floor's window.
	r.noteReset("a", resetOutcome{began: at.Add(3 * time.Second), returned: at.Add(3 * time.Second), stale: time.Second})
	if e := r.get("a").lost; e.until.Before(at.Add(10 * time.Minute)) {
		t.Fatalf("a system given an entry while the floor is open forgot it: %+v", e)
	}
}

// TestWindowRegistryForgetsEndedEntries: systems that came and went (their
// windows ended) leave no entry behind: they are dropped as time passes
// (expire), and dropEnded (a Controller's Close) drops an ended entry at
// once but never an open one.
func TestWindowRegistryForgetsEndedEntries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := windowRegistry{max: 4096}
	for i := 0; i < 100_000; i++ { // a host a second, each reset's window 30 s
		at := t0.Add(time.Duration(i) * time.Second)
		r.noteReset(fmt.Sprint("host", i), resetOutcome{began: at, returned: at, stale: 30 * time.Second})
	}
	if len(r.m) > 200 {
		t.Fatalf("the registry grows with hosts whose windows ended: %d entries", len(r.m))
	}
	if !r.floor.at.IsZero() {
		t.Fatalf("no open window was dropped, yet the floor is %+v", r.floor)
	}
	last := t0.Add(99_999 * time.Second)
	r.dropEnded("host99999", last.Add(time.Second))
	if _, ok := r.m["host99999"]; !ok {
		t.Fatal("dropEnded dropped an open window")
	}
	r.dropEnded("host99999", last.Add(30*time.Second))
	if _, ok := r.m["host99999"]; ok {
		t.Fatal("dropEnded kept an ended window")
	}
}

// TestWindowRegistryQueuedResetUntilTaskEnded: a reset answered 202
// Accepted keeps a lost reset's window from its return until its task is
// read ended; then its windows count from that reading, as an answered
// reset's (a press's run rule included). A reading of another task, or
// one after a later reset, changes nothing: that queued reset stays lost.
func TestWindowRegistryQueuedResetUntilTaskEnded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const stale, lostSpan, pressSpan = 30 * time.Second, 390 * time.Second, 210 * time.Second
	r := windowRegistry{max: 4096}
	r.noteReset("k", resetOutcome{began: t0, returned: t0, stale: stale, lostSpan: lostSpan, pressSpan: pressSpan,
		queued: true, monitor: "/redfish/v1/TaskService/Tasks/7", offPress: true})
	w := r.get("k")
	if !w.queued.until.Equal(t0.Add(lostSpan)) || w.pushOK {
		t.Fatalf("a queued press: %+v, want a lost window and no answered press", w)
	}
	r.taskEnded("k", "/redfish/v1/TaskService/Tasks/8", t0.Add(time.Minute), stale, pressSpan)
	if w := r.get("k"); w.queued.at.IsZero() {
		t.Fatal("another task's reading ended the queued reset's window")
	}
	ended := t0.Add(time.Minute)
	r.taskEnded("k", "/redfish/v1/TaskService/Tasks/7", ended, stale, pressSpan)
	w = r.get("k")
	if !w.queued.at.IsZero() || !w.lost.at.IsZero() || !w.press.at.Equal(ended) || !w.pushOK || !w.reset.until.Equal(ended.Add(stale)) {
		t.Fatalf("the task read ended at %v: %+v, want the windows of a press answered then", ended, w)
	}

	// A later reset before the task was read: the queued one stays lost.
	r.noteReset("q", resetOutcome{began: t0, returned: t0, stale: stale, lostSpan: lostSpan, queued: true, monitor: "/redfish/v1/TaskService/Tasks/9"})
	r.noteReset("q", resetOutcome{began: t0.Add(time.Second), returned: t0.Add(time.Second), stale: stale, lostSpan: lostSpan})
	r.taskEnded("q", "/redfish/v1/TaskService/Tasks/9", t0.Add(2*time.Second), stale, pressSpan)
	if w := r.get("q"); !w.lost.until.Equal(t0.Add(lostSpan)) {
		t.Fatalf("a queued reset followed by another: %+v, want its lost window kept", w)
	}
}
