package remediation_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestMovedMidAttemptReleasesOldHostFirst: a Machine whose host changes
// while its request holds the old host has that request removed first
// (state still naming the old host), and only once it is gone is a new
// request written to the new host: never two held at once.
func TestMovedMidAttemptReleasesOldHostFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	for _, ph := range []remediation.Phase{remediation.PhasePowerOffRequested, remediation.PhaseNodeDeleted} {
		st := remediation.State{Phase: ph, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1"}
		held := remediation.Host{Name: "bmh-2", RebootAnnotation: true, Requested: true, Fenced: true}
		d := remediation.Decide(remediation.Observed{Machine: m, State: st, Host: held, Admitted: true}, t0.Add(time.Second))
		if !d.RemoveRebootAnnotation || d.AddRebootAnnotation || d.DeleteNode || d.State.Host != "bmh-1" {
			t.Fatalf("%s, moved to bmh-2 while bmh-1 is held: want the old request removed first, nothing else; got %+v", ph, d)
		}
		d = remediation.Decide(remediation.Observed{Machine: m, State: st, Host: remediation.Host{Name: "bmh-2"}, Admitted: true}, t0.Add(2*time.Second))
		if d.RemoveRebootAnnotation || !d.AddRebootAnnotation || !d.UpdateState || d.State.Host != "bmh-2" ||
			d.State.Phase != remediation.PhasePowerOffRequested || !d.State.RequestedAt.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("%s, bmh-1 released: want a new request persisted for bmh-2; got %+v", ph, d)
		}
	}
	// A timeout while the old host is held retries nowhere until it is released.
	st := remediation.State{Phase: remediation.PhasePoweringOn, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1"}
	d := remediation.Decide(remediation.Observed{Machine: m, State: st, Host: remediation.Host{Name: "bmh-2", RebootAnnotation: true}, Admitted: true}, t0.Add(time.Hour))
	if !d.RemoveRebootAnnotation || d.AddRebootAnnotation {
		t.Fatalf("retry after a move while bmh-1 is held: want bmh-1 released first; got %+v", d)
	}
}
