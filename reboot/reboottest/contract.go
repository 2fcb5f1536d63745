package reboottest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// Contract checks the HostStore's contract directly: Get of a missing host
// wraps ErrNotFound; Update writes annotations and status together and
// returns the record with a new version; an Update with a version that is
// no longer current (also after a write through the other handle) wraps
// ErrConflict and changes nothing; and, if the store is a
// reboot.HostWatcher: Watch returns within 10 s, and if it can watch (no
// error), 100 writes nobody reads from the watch do not block, the watch
// then holds a value, each of three later writes gives another once the
// value before was read, and its channel is closed when its context ends.
func Contract(t testing.TB, newStores NewStores) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := newStores(reboot.Host{Name: "h", Online: true})
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	if s.Close != nil {
		defer s.Close()
	}
	other := s.Other
	if other == nil {
		other = s.Hosts
	}
	if _, err := s.Hosts.Get(ctx, "no-such-host"); !errors.Is(err, reboot.ErrNotFound) {
		t.Errorf("Get of a missing host: %v, want an error wrapping reboot.ErrNotFound", err)
	}
	h, err := s.Hosts.Get(ctx, "h")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if h.Name != "h" || !h.Online {
		t.Errorf("Get returned %+v, want the host created (name h, online)", h)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := h
	w.Annotations = map[string]string{reboot.Annotation: "", "example.com/other": "x"}
	w.Status = reboot.Status{PendingRebootSince: at}
	written, err := s.Hosts.Update(ctx, w)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if written.Version == h.Version {
		t.Errorf("Update returned version %q, the version it was given: a new version is needed", written.Version)
	}
	got, err := other.Get(ctx, "h")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Version != written.Version || !got.Status.PendingRebootSince.Equal(at) || len(got.Annotations) != 2 {
		t.Errorf("after Update: %+v, want the annotations, status and version written (%q)", got, written.Version)
	}
	// A stale version: refused, nothing changes.
	stale := w
	stale.Annotations = map[string]string{}
	if _, err := s.Hosts.Update(ctx, stale); !errors.Is(err, reboot.ErrConflict) {
		t.Errorf("Update with a stale version: %v, want an error wrapping reboot.ErrConflict", err)
	}
	// A write through the other handle makes the first one's read stale.
	mine, _ := s.Hosts.Get(ctx, "h")
	theirs := mine
	theirs.Annotations = map[string]string{reboot.AnnotationPrefix + "fencer": ""}
	if _, err := other.Update(ctx, theirs); err != nil {
		t.Fatalf("Update through the other handle: %v", err)
	}
	mine.Annotations = map[string]string{}
	if _, err := s.Hosts.Update(ctx, mine); !errors.Is(err, reboot.ErrConflict) {
		t.Errorf("Update after another writer's: %v, want an error wrapping reboot.ErrConflict (a lost keyed request)", err)
	}
	if got, _ := other.Get(ctx, "h"); got.Annotations[reboot.AnnotationPrefix+"fencer"] != "" || len(got.Annotations) != 1 {
		t.Errorf("after refused writes: annotations %v, want the other writer's only", got.Annotations)
	}

	hw, ok := s.Hosts.(reboot.HostWatcher)
	if !ok {
		return
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	type watched struct {
		ch  <-chan struct{}
		err error
	}
	started := make(chan watched, 1)
	go func() {
		ch, err := hw.Watch(wctx, "h")
		started <- watched{ch, err}
	}()
	var ch <-chan struct{}
	select {
	case w := <-started:
		ch, err = w.ch, w.err
	case <-time.After(watchReturns):
		t.Errorf("Watch did not return within %v: a watch is set up, or fails, without waiting for a change (the Runner's first pass of a host waits for it)", watchReturns)
		return
	}
	if err != nil {
		// A store that cannot watch in this configuration says so; the
		// Client and the Runner then poll.
		wcancel()
		t.Logf("Watch: %v: the watch checks were not run", err)
		return
	}
	wrote := make(chan error, 1)
	go func() {
		for i := 0; i < 100; i++ {
			if err := mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations["example.com/n"] = time.Duration(i).String() }); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("writes while watched: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("100 writes blocked on a watch nobody reads (sends must never block writers)")
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Error("the watch closed before its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Error("no value on the watch after 100 writes")
	}
	// Every later change gives a value again (the watch re-arms).
	for i := 0; i < 3; i++ {
		if err := mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations["example.com/again"] = time.Duration(i).String() }); err != nil {
			t.Fatalf("write while watched: %v", err)
		}
		select {
		case _, ok := <-ch:
			if !ok {
				t.Error("the watch closed before its context ended")
				return
			}
		case <-time.After(10 * time.Second):
			t.Errorf("no value on the watch after write %d following a value read: a watch must report every change made after it returned, not only the first", i+1)
			return
		}
	}
	wcancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
		case <-deadline:
			t.Error("the watch's channel was not closed after its context ended")
		}
		return
	}
}

// watchReturns bounds how long Contract lets Watch take to return.
const watchReturns = 10 * time.Second
