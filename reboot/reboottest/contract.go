package reboottest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/internal/watchcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Contract checks the HostStore's contract directly: Get of a missing host
// wraps ErrNotFound; Update writes annotations and status (every field)
// together and returns the record with a new version; an Update with a
// version that is no longer current (also after a write through the other
// handle, and also one that changes the Status only, as the reboot
// controller's power-on does: its compare-and-swap is what stops a
// power-on decided before a keyed annotation was added) wraps ErrConflict
// and changes nothing; an Update with a context that ended fails and
// writes nothing, both with a cancelled context and with one ended by the
// clock only (reboot.ClockBound past its deadline, as a Guard's is after
// a pause: Err non-nil, Done not yet closed), so a store must check
// ctx.Err() just before it writes, not only select on Done (a
// reboot.Guard fences a write only through the context it returns: a
// leader paused between its Hold and its Update resumes with that context
// ended, and only the store can refuse); that of
// racecheck.Writers Updates at once from one read (half through
// Stores.Other, a second process's handle, beside readers, in each of
// racecheck.Rounds to racecheck.MaxRounds rounds (racecheck.Enough))
// exactly one succeeds, the others wrap ErrConflict, and the record read
// back through Other holds the winner's write (a store whose version
// check is not atomic with its write fails, also one atomic only within
// one process; Contract fails when Other is nil, since through one handle
// it could not catch that); and, if the
// store is a reboot.HostWatcher: Watch returns within 10 s, and if it can
// watch (no error), 100 writes nobody reads from the watch do not block,
// the watch then holds a value, each of three later writes gives another
// once the value before was read (the first of them changes the Status
// only: the reboot controller's evidence must wake a watcher too, not only
// changed annotations), a second Watch of the host while the first runs
// gets every change as the first does (the reboot loop, remediation's Loop
// and Client's Wait methods watch one host), ending one of them leaves the
// other working, and a channel is closed when its context ends
// (internal/watchcheck).
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
		t.Errorf("reboottest: Stores.Other is nil: give a second handle on the same records, as another process has it (its own client, connection or open of the same storage); through Hosts alone the race cannot catch a store whose compare-and-swap is atomic only within one process (the controller's write and a fencing client's keyed request from one read both accepted, the request lost)")
		other = s.Hosts
	} else if racecheck.Same(s.Other, s.Hosts) {
		t.Errorf("reboottest: Stores.Other is Stores.Hosts given again: give a second handle on the same records (its own client, connection or open of the same storage); through one handle the race cannot catch a store whose compare-and-swap is atomic only within one process")
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
	w.Status = fullStatus(t, at)
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
	if got.Version != written.Version || !got.Status.Equal(w.Status) || len(got.Annotations) != 2 {
		t.Errorf("after Update: %+v, want the annotations, status (every field: a restart counts the presses a previous process sent from Status.LastPress, ActingSince and Format) and version written (%q): %+v",
			got, written.Version, w.Status)
	}
	if got, err := s.Hosts.Get(ctx, "h"); err != nil || !got.Status.Equal(w.Status) {
		t.Errorf("after Update, through the handle that wrote it: status %+v (%v), want every field written: %+v", got.Status, err, w.Status)
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
	// A Status-only write with a stale version (the power-on's write,
	// its annotations as read): refused too, whatever the annotations.
	// Here the other writer changed the Status only, so the stale write's
	// annotations are the stored ones: a store that compares versions
	// only when the annotations change (a status patch without a
	// resourceVersion) lets it through.
	mine, _ = s.Hosts.Get(ctx, "h")
	theirs = mine
	theirs.Status.LastPoweredOff = at.Add(time.Minute)
	if _, err := other.Update(ctx, theirs); err != nil {
		t.Fatalf("Update through the other handle: %v", err)
	}
	mine.Status.LastPoweredOn = at.Add(2 * time.Minute)
	if _, err := s.Hosts.Update(ctx, mine); !errors.Is(err, reboot.ErrConflict) {
		t.Errorf("a Status-only Update with a stale version (the power-on's write, annotations unchanged): %v, want an error wrapping reboot.ErrConflict (a power-on decided before a keyed annotation was added would go through)", err)
	}
	if got, _ := other.Get(ctx, "h"); !got.Status.LastPoweredOn.Equal(w.Status.LastPoweredOn) || !got.Status.LastPoweredOff.Equal(at.Add(time.Minute)) {
		t.Errorf("after a refused Status-only write: LastPoweredOn %v, LastPoweredOff %v, want %v and the other writer's %v",
			got.Status.LastPoweredOn, got.Status.LastPoweredOff, w.Status.LastPoweredOn, at.Add(time.Minute))
	}

	// An ended context (a Guard's, its lease run out): refused, nothing
	// written. Cancelled (Done closed), and ended by the clock only
	// (reboot.ClockBound past its deadline after a pause: Err non-nil,
	// Done not yet closed), which a store that selects on Done only
	// writes with.
	for _, e := range endedctx.From(ctx) {
		cur, err := s.Hosts.Get(ctx, "h")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		late := cur
		late.Annotations = map[string]string{reboot.AnnotationPrefix + "late": ""}
		late.Status.LastPoweredOn = at.Add(3 * time.Minute)
		if _, err := s.Hosts.Update(e.Ctx, late); err == nil {
			t.Errorf("Update with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a reboot.Guard's write after its lease ran out, from a paused leader, would land)", e.Name)
		}
		if got, err := other.Get(ctx, "h"); err != nil || got.Version != cur.Version || got.Annotations[reboot.AnnotationPrefix+"late"] != "" || got.Status.LastPoweredOn.Equal(late.Status.LastPoweredOn) {
			t.Errorf("after an Update with %s: version %q (was %q), annotations %v, LastPoweredOn %v (%v): the write landed",
				e.Name, got.Version, cur.Version, got.Annotations, got.Status.LastPoweredOn, err)
		}
	}

	raceCheck(ctx, t, s.Hosts, other, "h")

	hw, ok := s.Hosts.(reboot.HostWatcher)
	if !ok {
		return
	}
	// Even writes change the Status only (the reboot controller's
	// evidence, which remediation acts on at once), odd ones annotations
	// only: the first write after the re-arm is Status-only.
	watchcheck.Check(ctx, t, "host h",
		func(ctx context.Context) (<-chan struct{}, error) { return hw.Watch(ctx, "h") },
		func(ctx context.Context, i int) error {
			return mutate(ctx, other, "h", func(h *reboot.Host) {
				if i%2 == 0 {
					h.Status.PendingRebootSince = at.Add(time.Duration(i+1) * time.Second)
				} else {
					h.Annotations["example.com/n"] = time.Duration(i).String()
				}
			})
		})
}

// fullStatus returns a Status with every field set (both modes hard: the
// zero Mode is soft), each instant another second after at (a store may
// keep whole seconds only), so that a store that drops or mixes up a field
// fails Contract: a restarted controller counts what a previous process
// sent from these fields (Status.LastPress, ActingSince, Format).
func fullStatus(t testing.TB, at time.Time) reboot.Status {
	sec := func(n int) time.Time { return at.Add(time.Duration(n) * time.Second) }
	st := reboot.Status{
		LastPoweredOn: sec(0), PendingRebootSince: sec(1), LastPoweredOff: sec(2), Mode: power.ModeHard,
		Seen: []string{"fence#1f", "maint#2e"}, LastRequestSeen: sec(3),
		OfflineSince: sec(4), OfflineMode: power.ModeHard, HoldBroken: sec(5),
		RewriteSeen: sec(6), LastRewriteSeen: sec(7), LastPress: sec(8), ActingSince: sec(9),
		Works: 7, Format: reboot.StatusFormat, SoftSince: sec(10), OfflineSoftSince: sec(11), OnConfirmed: sec(12),
		OfflineOffSeen: sec(13), UnsureSince: sec(14), UnsureInterrupted: true, OffOnSane: sec(15),
		UnsureUnbroken: true, OffOnSaneDecided: sec(16), StuckOnDecided: sec(17), StuckGaveUp: sec(18),
	}
	v := reflect.ValueOf(st)
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("reboottest: Contract writes no Status.%s: set it in fullStatus", v.Type().Field(i).Name)
		}
	}
	return st
}
