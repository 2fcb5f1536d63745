package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40i_RecreatedSameNameLeavesOldHostOff: doc.go: "a Machine
// deleted mid-remediation (its State goes with it) has the request
// removed from that host, whatever HostOf answers then ..., and only then
// its admission released". The admission record is keyed by the
// Machine's name only. m1 (UID uid-m1) holds h1 off mid-remediation; it is
// deleted and a Machine of the same name (another UID: the inventory's
// new record for a re-racked server, or a name reused by the user's own
// MachineStore) is created, on h2, healthy, before a pass sees the name
// missing (a work queue coalesces both events into one pass). The pass
// reads the new Machine, finds it admitted (the old one's admission),
// decides "healthy: release" and release() deletes the admission together
// with Admissions.Requests["m1"], the only record of the request on h1,
// without removing it (reconciler.go Reconcile never compares the
// recorded request with the Machine it reads; abandon runs only on
// ErrNotFound). h1 stays held off for good, owned by nobody. Ground
// truth: h1's fake hardware.
func TestReview40i_RecreatedSameNameLeavesOldHostOff(t *testing.T) {
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	a, err := g.cluster.GetAdmissions(context.Background())
	require.NoError(t, err)
	require.Equal(t, "h1", a.Requests["m1"].Host, "precondition: the request on h1 is recorded with the admission")

	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1-new", NodeName: "m1", Cluster: "c"})
	g.cluster.SetNodeReady("m1", true)
	g.hostOf.Store("h2")
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	a, _ = g.cluster.GetAdmissions(context.Background())
	held, off, ann := g.h1Held(t, 2*time.Second)
	if (held || off) && !a.Has("m1") {
		t.Fatalf("the old m1's request still holds h1 (annotations %v, hardware off %v) but the admission, and with it the only record of that request (Requests), is released (%v, %v): h1 is off for good; truth %v",
			ann, off, a.Machines, a.Requests, g.hw["h1"].Truth())
	}
	if held || off {
		t.Fatalf("h1 still held (annotations %v), off %v", ann, off)
	}
}
