package remediation

import (
	"testing"
	"time"
)

// TestHeld_GaveUpKeepsAdmissionWhileHostHeld: a remediation that is over
// without its host known on (given up after a cancellation, failed) keeps
// its admission, the storm guard's count and the kube module's per-host
// lock, while its host is held: a reboot pending, or off after its
// request and not known on since. It releases it once the host is on.
// Before: every such decision released the admission at once.
func TestHeld_GaveUpKeepsAdmissionWhileHostHeld(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	late := t0.Add(3 * time.Minute) // past the timeout
	cfg := Config{Timeout: time.Minute, RetryLimit: -1}
	sick := Machine{Name: "m0", UID: "u0", NodeName: "n0", NeedsRemediation: true}
	well := sick
	well.NeedsRemediation = false
	off := Host{Name: "h0", OffAfterRequest: true}
	pending := Host{Name: "h0", RebootPending: true}
	on := Host{Name: "h0", OffAfterRequest: true, PoweredOn: true}
	attempt := func(p Phase) State { return State{Phase: p, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h0"} }
	cancelled := func(p Phase) State {
		s := attempt(p)
		s.Canceled, s.CanceledAt = true, t0
		return s
	}
	over := func(p Phase, canceled bool) State {
		s := attempt(p)
		s.Finished, s.Canceled = t0.Add(time.Minute), canceled
		return s
	}
	for _, tc := range []struct {
		name    string
		m       Machine
		s       State
		h       Host
		release bool
	}{
		{"cancelled, gave up waiting for the power-on, host off", well, cancelled(PhasePoweringOn), off, false},
		{"cancelled, gave up waiting for the power-on, reboot pending", well, cancelled(PhasePoweringOn), pending, false},
		{"cancelled, gave up waiting for the power-on, host never off after the request", well, cancelled(PhasePoweringOn), Host{Name: "h0"}, true},
		{"escalated in power-off-requested, host off", sick, attempt(PhasePowerOffRequested), off, false},
		{"escalated in power-off-requested, request still on the host", sick, attempt(PhasePowerOffRequested), Host{Name: "h0", Requested: true, RebootAnnotation: true}, false},
		{"escalated in powering-on, host off", sick, attempt(PhasePoweringOn), off, false},
		{"escalated, host never off", sick, attempt(PhasePowerOffRequested), Host{Name: "h0"}, true},
		{"escalated, no host, nothing read", sick, attempt(PhasePowerOffRequested), Host{Missing: true}, true},
		// Missing says the Machine maps to no host now, not that the host
		// its request was written to (read through State.Host) is on.
		{"escalated, no host now, the request's host off after it", sick, attempt(PhasePowerOffRequested), Host{Missing: true, OffAfterRequest: true}, false},
		{"escalated, no host now, the request's host on since", sick, attempt(PhasePowerOffRequested), Host{Missing: true, OffAfterRequest: true, PoweredOn: true}, true},
		{"failed, still marked, host off", sick, over(PhaseFailed, false), off, false},
		{"failed, still marked, host on", sick, over(PhaseFailed, false), on, true},
		{"failed, mark gone, host off", well, over(PhaseFailed, false), off, false},
		{"done after a cancellation, host off", well, over(PhaseDone, true), off, false},
		{"done after a cancellation, host on", well, over(PhaseDone, true), on, true},
		{"done after a cancellation, reboot pending", well, over(PhaseDone, true), pending, false},
		// Its owner keeps it off (Online false), no request on it: the
		// power-on for the request never comes; not the remediation's.
		{"failed, host off, its owner keeps it off", sick, over(PhaseFailed, false), Host{Name: "h0", OffAfterRequest: true, Offline: true}, true},
		// A reboot pending is not over: the reboot controller keeps it
		// pending while Online is false and powers the host on for it
		// when Online is true again (review 40n: an Online blip).
		{"done after a cancellation, reboot pending, its owner keeps it off", well, over(PhaseDone, true), Host{Name: "h0", RebootPending: true, Offline: true}, false},
		{"failed, the request still on it", sick, over(PhaseFailed, false), Host{Name: "h0", Requested: true, RebootAnnotation: true, OffAfterRequest: true, Offline: true}, false},
	} {
		o := Observed{Machine: tc.m, State: tc.s, Host: tc.h, Admitted: true, Node: Node{Name: "n0"}}
		d := cfg.Decide(o, late)
		if InFlight(d.State.Phase) {
			t.Errorf("%s: still in flight (%s): %s", tc.name, d.State.Phase, d.Reason)
			continue
		}
		if d.Release != tc.release {
			t.Errorf("%s: Release = %v, want %v (the host is held: %v): %s", tc.name, d.Release, tc.release, !tc.release, d.Reason)
		}
		if d.AddRebootAnnotation {
			t.Errorf("%s: a new reboot request: %s", tc.name, d.Reason)
		}
	}
}
