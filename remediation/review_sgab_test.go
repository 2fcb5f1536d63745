package remediation_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReviewSgab_GoneNoTimeOwnHostStrayReleasedWhileOff: fa4b924 made a
// gone Machine's recorded request without a time (a failed remediation
// cleared: LastRequest has no T) count a host it moved from ("with no
// time, nothing would count, and a gone Machine's admission would be
// released while a host ... is off for a request of its"). The same
// record's own host (Admissions.Requests[m0].Host) is not: stillHeld
// returns false for a request with no At before it reads anything
// (reconciler.go stillHeld). m0 is gone; its admission records the
// cleared request (no T) on h0. A late write of m0's (a stale writer,
// the request of its failed attempt with that attempt's T) lands on h0,
// and the reboot controller powers h0 off for it. m0's release pass
// (abandon) finds the request there, removes it, and releases m0's
// admission in the same pass, with h0 off (ground truth) and its reboot
// pending; m1 is then admitted and its host requested: two hosts off or
// about to be, limit 1. For a live Machine such a request is a stray
// (State.StraySeen) that keeps the admission while the host may be off
// for it (doc.go); for a host a gone Machine moved from it is recorded
// (Seen) and counted; on the gone Machine's own host it is not.
func TestReviewSgab_GoneNoTimeOwnHostStrayReleasedWhileOff(t *testing.T) {
	w := newSgaaWorld(t, true)
	attempt := w.clk.Now().Add(-time.Hour)
	// m0's failed remediation on h0 was cleared long ago; m0 was kept
	// admitted (say, for a host it moved from), then deleted.
	if err := w.c.Delete(w.ctx, "m0"); err != nil {
		t.Fatal(err)
	}
	a, err := w.c.GetAdmissions(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Machines = []string{"m0"}
	a.Requests = map[string]remediation.Request{"m0": {Value: remediation.RebootValue("uid-m0", time.Time{}), Host: "h0"}}
	// Kept for a host it had moved from (fa4b924's failure file), since
	// on again: nothing holds it there.
	a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: attempt.Add(-10 * time.Minute)}}
	if err := w.c.PutAdmissions(w.ctx, a); err != nil {
		t.Fatal(err)
	}
	// m1 fails: it waits for the storm guard (limit 1) while m0 is admitted.
	w.c.SetNodeReady("m1", false)
	w.c.SetNeedsRemediation("m1", true)
	// The late write of m0's failed attempt lands on h0 (as m0 is
	// deleted: before its first release pass).
	if err := w.hosts.Mutate("h0", func(h *reboot.Host) {
		h.Annotations = maps.Clone(h.Annotations)
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[remediation.RebootAnnotation] = remediation.RebootValue("uid-m0", attempt)
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 360; i++ { // an hour of 10 s steps
		w.clk.Advance(10 * time.Second)
		if _, err := w.reboots.Reconcile(w.ctx, "h0"); err != nil && !errors.Is(err, reboot.ErrConflict) {
			t.Logf("reboot h0: %v", err)
		}
		if _, err := w.reboots.Reconcile(w.ctx, "h1"); err != nil && !errors.Is(err, reboot.ErrConflict) {
			t.Logf("reboot h1: %v", err)
		}
		for _, m := range []string{"m0", "m1"} {
			if _, err := w.rem.Reconcile(w.ctx, m); err != nil && !errors.Is(err, remediation.ErrConflict) && !errors.Is(err, remediation.ErrNotFound) {
				t.Logf("remediation %s: %v", m, err)
			}
		}
		if tk := w.taken(); len(tk) > 1 {
			hh, _ := w.hosts.Get(w.ctx, "h0")
			adm, _ := w.c.GetAdmissions(w.ctx)
			t.Fatalf("after %v: hosts %v off or requested by ground truth (h0 on=%v, h1 on=%v), limit 1; admissions %v; h0 annotations %v status pending=%v %+v",
				time.Duration(i+1)*10*time.Second, tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), adm.Machines, hh.Annotations, hh.Status.Pending(), hh.Status)
		}
	}
	adm, _ := w.c.GetAdmissions(w.ctx)
	t.Logf("end: admissions %v; h0 on=%v h1 on=%v", adm.Machines, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn())
}

// TestReviewSgab_StuckTransitioningOwnerBlipReleasesOffHost: the scenario
// afe3342 fixed (TestReviewSgaa_StuckTransitioningBMCReleasesOffHost: h0
// powered off for m0's request, its BMC then reading Transitioning for
// ever and refusing power-ons; ground truth off), plus a blip of h0's
// owner: Online false for 10 minutes, then true again. On a Transitioning
// reading the reboot controller begins the Online=false enforcement
// (OfflineSince written: "the enforcement begins on any of them"), so
// OfflineSince comes after the refused power-on's LastPoweredOn and the
// "power-on never read On" rule (reboothosts.go read:
// !OfflineSince.After(LastPoweredOn)) drops RebootPending (once the
// controller's powering-on wait is over, 3.5 min into the blip): m0's admission is released while h0 is off, and m1 is admitted
// and its host powered off: two hosts off, limit 1. Online true clears
// OfflineSince again, but the admission is gone. The comment in read
// says such a blip "does not let the host go"; RebootAPIHosts.OwnerOnline's
// doc says a blip "releases nothing". With an honest BMC (an Off reading)
// the controller writes no OfflineSince for a host already off.
func TestReviewSgab_StuckTransitioningOwnerBlipReleasesOffHost(t *testing.T) {
	for _, withPower := range []bool{true, false} {
		t.Run(map[bool]string{true: "power", false: "nopower"}[withPower], func(t *testing.T) {
			w := newSgaaWorld(t, withPower)
			w.c.SetNodeReady("m0", false)
			w.c.SetNeedsRemediation("m0", true)
			var stuckAt time.Time
			setOnline := func(on bool) {
				if err := w.hosts.Mutate("h0", func(h *reboot.Host) { h.Online = on }); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 720; i++ { // 2 h of 10 s steps
				w.step(10 * time.Second)
				if stuckAt.IsZero() && !w.powers["h0"].HardwareOn() {
					*w.stuck["h0"], w.refuse["h0"] = true, true
					stuckAt = w.clk.Now()
					w.c.SetNodeReady("m1", false)
					w.c.SetNeedsRemediation("m1", true)
				}
				if !stuckAt.IsZero() {
					switch w.clk.Now().Sub(stuckAt) {
					case time.Hour:
						setOnline(false) // the owner's blip
					case time.Hour + 10*time.Minute:
						setOnline(true)
					}
				}
				if tk := w.taken(); len(tk) > 1 {
					hh, _ := w.hosts.Get(w.ctx, "h0")
					adm, _ := w.c.GetAdmissions(w.ctx)
					t.Fatalf("at %v after h0's BMC stuck: hosts %v off or requested by ground truth (h0 on=%v, h1 on=%v), limit 1; admissions %v; h0 Online=%v LastPoweredOn=%v OfflineSince=%v PendingRebootSince=%v",
						w.clk.Now().Sub(stuckAt), tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), adm.Machines, hh.Online, hh.Status.LastPoweredOn, hh.Status.OfflineSince, hh.Status.PendingRebootSince)
				}
			}
			if stuckAt.IsZero() {
				t.Fatal("premise: h0 never powered off for m0's remediation")
			}
			if w.powers["h0"].HardwareOn() {
				t.Fatal("premise: h0 on again")
			}
		})
	}
}
