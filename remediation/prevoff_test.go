package remediation_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestPrevHostOffBlocksNewAttemptAndRelease: a remediation that is over,
// whose Machine moved from h1 to h2, while h1 may still be off for a
// request of the Machine's that landed there after the move
// (Observed.PrevHostOff): its admission is kept and PrevHost is not
// forgotten, and if the Machine is unhealthy again no new request is
// written to h2 (a second host off for the same Machine, counted once)
// before h1 is on; the wait ends at Timeout with an escalation. Once h1
// is not off for it, PrevHost is forgotten and the admission released.
// Before (review 40p): PrevHost was forgotten on the first pass that
// found no request on it, and the admission released with h1 off.
func TestPrevHostOffBlocksNewAttemptAndRelease(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	now := time.Now()
	cfg := remediation.Config{PollInterval: time.Second, Timeout: time.Minute}
	base := remediation.Observed{
		Machine:  remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1"},
		Node:     remediation.Node{Name: "m1", UID: "n1", Ready: true},
		Host:     remediation.Host{Name: "h2"},
		State:    remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(time.Minute)},
		Admitted: true, MayStart: true,
	}

	healthy := base
	healthy.PrevHostOff = true
	d := cfg.Decide(healthy, now)
	if d.Release || d.State.PrevHost != "h1" {
		t.Fatalf("healthy, h1 off for a request of m1's: want admission and PrevHost kept, got release=%v prevHost=%q (%s)", d.Release, d.State.PrevHost, d.Reason)
	}

	sick := healthy
	sick.Machine.NeedsRemediation = true
	sick.Node.Ready = false
	d = cfg.Decide(sick, now)
	if d.AddRebootAnnotation || d.Release || !strings.Contains(d.Reason, "h1") {
		t.Fatalf("unhealthy again, h1 off for a request of m1's: want no request on h2, admission kept, a message naming h1; got add=%v release=%v %q", d.AddRebootAnnotation, d.Release, d.Reason)
	}
	late := sick
	late.State.UnhealthyAgain = now.Add(-2 * cfg.Timeout)
	if d = cfg.Decide(late, now); d.AddRebootAnnotation || d.State.Phase != remediation.PhaseFailed {
		t.Fatalf("the wait for h1 past Timeout: want the remediation failed (escalated), no request; got phase %s add=%v (%s)", d.State.Phase, d.AddRebootAnnotation, d.Reason)
	}

	on := base // h1 not off for it (on since): forgotten, released
	if d = cfg.Decide(on, now); !d.Release || d.State.PrevHost != "" {
		t.Fatalf("h1 on: want PrevHost forgotten and the admission released, got release=%v prevHost=%q (%s)", d.Release, d.State.PrevHost, d.Reason)
	}
}
