package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReview40m_OperatorEchoOnReleasesGoneMachineWhileOff: round 12's fix
// (a441da8) made Host.PoweredOn wait out an "on" status written within
// StaleReads of the request (it may echo Ironic's cached state from
// before it), but held() does not read PoweredOn alone: it reads
// OffAfterRequest || RebootPending, and for that same reading
// OperatorHosts.read sets OffAfterRequest false (the status says on) and
// RebootPending false (`!since`, and since is true for any status written
// after the request). So a remediation that is over (here: a Machine
// deleted right after its request, abandon/stillHeld) is not held by a
// reading that, by the package's own rule, cannot show the host on since
// the request: its admission is released while Ironic has the host off
// for the request, and with MaxCount(1) the next Machine is admitted and
// its host asked off: two hosts off at once. Ground truth: the stand-in
// operator's log: h1 went off after the echoed reading and was never on
// since.
func TestReview40m_OperatorEchoOnReleasesGoneMachineWhileOff(t *testing.T) {
	ctx := context.Background()
	const stale = 8 * time.Second
	w := newOperatorWorld(t, 2, stale, nil)

	w.unhealthy("m1")
	h, requestAt := w.firstRequest(ctx)

	// The operator writes a status a second after the request with
	// Ironic's cached "on" (read before the request); Ironic then powers
	// h1 off for the request. Ground truth from here: h1 off, never on
	// since within the test (this stand-in operator is slow to power on).
	w.statusLater("h1", true, nil)
	h1OffAt := time.Now()

	// m1 is deleted (its owner scales it down, or replaces it) while its
	// request holds h1 off.
	w.deleteMachine(ctx, "m1", 3)
	require.Less(t, time.Since(requestAt), stale, "precondition: every read within StaleReads of the request")
	w.get(ctx, "h1", &h)
	require.True(t, h.Spec.Online, "precondition: h1's owner wants it on (not Offline)")
	adm := w.secondUnhealthy(ctx)
	m2Req := w.requested(ctx, "h2")
	if !adm.Has("m1") || adm.Has("m2") || m2Req {
		t.Fatalf("limit MaxCount(1): gone m1's admission released (admissions %v) on an on status written %v after its request (within StaleReads %v, which the same store's PoweredOn refuses as a possible echo), while h1 has been off since %v and never on since (ground truth); m2 admitted, its request on h2: %v",
			adm.Machines, h1OffAt.Sub(requestAt).Round(time.Millisecond), stale, h1OffAt.Format(time.StampMilli), m2Req)
	}
}
