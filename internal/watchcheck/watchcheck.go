// Package watchcheck checks a store's Watch against the contract the
// Runner relies on (reboot.HostWatcher's, shared by
// remediation.MachineWatcher and RecordWatcher), for the conformance kits
// reboot/reboottest and remediation/remediationtest.
package watchcheck

import (
	"context"
	"testing"
	"time"
)

// Returns bounds how long Check lets Watch take to return.
const Returns = 10 * time.Second

// Check checks one watch of the record named what: watch returns within
// Returns (an error means the store cannot watch in this configuration:
// the checks are skipped and logged); 100 writes (write(0) to write(99))
// nobody reads from the watch do not block, and the watch then holds a
// value; each of three later writes (write(100) to write(102)) gives
// another value once the one before was read; a second watch of the same
// record, set up while the first runs (the reboot loop, remediation's
// Loop and a Client's Wait methods all watch one host), gets a value for
// each of two later writes (write(103), write(104)) as the first does,
// and once the second's context ends (its channel closed) the first still
// gets one for write(105); and the channel is closed once the watch's
// context ends. write(i) must change the record. It reports whether no
// check failed.
func Check(ctx context.Context, t testing.TB, what string, watch func(context.Context) (<-chan struct{}, error), write func(ctx context.Context, i int) error) bool {
	t.Helper()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	type watched struct {
		ch  <-chan struct{}
		err error
	}
	started := make(chan watched, 1)
	go func() {
		ch, err := watch(wctx)
		started <- watched{ch, err}
	}()
	var ch <-chan struct{}
	select {
	case w := <-started:
		if w.err != nil {
			// A store that cannot watch in this configuration says so; the
			// loops then poll (remediation's Loop falls back to its
			// poller; the Runner retries the watch and the reboot loop's
			// RequeueAfter still runs its passes).
			t.Logf("Watch of %s: %v: the watch checks were not run", what, w.err)
			return true
		}
		ch = w.ch
	case <-time.After(Returns):
		t.Errorf("Watch of %s did not return within %v: a watch is set up, or fails, without waiting for a change (the Runner's first pass of a key waits for it)", what, Returns)
		return false
	}
	wrote := make(chan error, 1)
	go func() {
		for i := range 100 {
			if err := write(ctx, i); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("writes to %s while watched: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("100 writes to %s blocked on a watch nobody reads (sends must never block writers)", what)
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Errorf("the watch of %s closed before its context ended", what)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no value on the watch of %s after 100 writes (a store that says it can watch is not polled: its changes would wait for the next resync)", what)
		return false
	}
	// Every later change gives a value again (the watch re-arms). Values
	// still pending from earlier writes are read first, so that a late
	// one cannot stand for the change under test.
	for i := range 3 {
	drain:
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					t.Errorf("the watch of %s closed before its context ended", what)
					return false
				}
			case <-time.After(200 * time.Millisecond):
				break drain
			}
		}
		if err := write(ctx, 100+i); err != nil {
			t.Fatalf("write to %s while watched: %v", what, err)
		}
		select {
		case _, ok := <-ch:
			if !ok {
				t.Errorf("the watch of %s closed before its context ended", what)
				return false
			}
		case <-time.After(10 * time.Second):
			t.Errorf("no value on the watch of %s after write %d following a value read: a watch must report every change made after it returned, not only the first", what, i+1)
			return false
		}
	}
	if !concurrent(ctx, t, what, ch, watch, write) {
		return false
	}
	wcancel()
	return closes(t, what, ch)
}

// closes reports whether ch is closed within 10 s (values still pending
// are read), failing t if not.
func closes(t testing.TB, what string, ch <-chan struct{}) bool {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
			return true
		case <-deadline:
			t.Errorf("the watch of %s's channel was not closed after its context ended", what)
			return false
		}
	}
}

// drain reads the values pending on ch (until none comes for 200 ms),
// reporting false if it is closed.
func drain(ch <-chan struct{}) bool {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return false
			}
		case <-time.After(200 * time.Millisecond):
			return true
		}
	}
}

// concurrent checks a second watch of the record while first (a running
// watch of it) runs: each of write(103) and write(104) gives a value on
// both; once the second's context ends its channel is closed, and
// write(105) still gives a value on first.
func concurrent(ctx context.Context, t testing.TB, what string, first <-chan struct{}, watch func(context.Context) (<-chan struct{}, error), write func(ctx context.Context, i int) error) bool {
	t.Helper()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	type watched struct {
		ch  <-chan struct{}
		err error
	}
	started := make(chan watched, 1)
	go func() {
		ch, err := watch(sctx)
		started <- watched{ch, err}
	}()
	var second <-chan struct{}
	select {
	case w := <-started:
		if w.err != nil {
			t.Errorf("a second Watch of %s while the first runs: %v (the reboot loop, remediation's Loop and a Client's Wait may all watch one record)", what, w.err)
			return false
		}
		second = w.ch
	case <-time.After(Returns):
		t.Errorf("a second Watch of %s, while the first runs, did not return within %v", what, Returns)
		return false
	}
	watches := []struct {
		name string
		ch   <-chan struct{}
	}{{"first", first}, {"second", second}}
	for i := range 2 {
		for _, w := range watches {
			if !drain(w.ch) {
				t.Errorf("the %s of two watches of %s closed before its context ended", w.name, what)
				return false
			}
		}
		if err := write(ctx, 103+i); err != nil {
			t.Fatalf("write to %s while watched twice: %v", what, err)
		}
		for _, w := range watches {
			select {
			case _, ok := <-w.ch:
				if !ok {
					t.Errorf("the %s of two watches of %s closed before its context ended", w.name, what)
					return false
				}
			case <-time.After(10 * time.Second):
				t.Errorf("no value on the %s of two watches of %s after a write: every Watch call must get every change (a store that keeps one watcher per record leaves all but one deaf)", w.name, what)
				return false
			}
		}
	}
	scancel()
	if !closes(t, what+" (the second of two watches)", second) {
		return false
	}
	if !drain(first) {
		t.Errorf("the first of two watches of %s closed when the second's context ended", what)
		return false
	}
	if err := write(ctx, 105); err != nil {
		t.Fatalf("write to %s while watched: %v", what, err)
	}
	select {
	case _, ok := <-first:
		if !ok {
			t.Errorf("the first of two watches of %s closed when the second's context ended", what)
			return false
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no value on the watch of %s after a second watch of it ended: ending one watch must not silence another", what)
		return false
	}
	return true
}
