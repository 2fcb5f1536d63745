package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40l_OperatorStaleOnReadingReleasesWhileOff: kube/operator.go's
// own evidence rule: "status.poweredOn is a power reading ... it may echo
// the hardware's state up to StaleReads old (Ironic's cached power state,
// synced periodically, and the operator's poll)". Host.PoweredOn
// (operator.go:203, `!present && bmh.Status.PoweredOn && after(updated,
// req.At)`) takes any on reading written after the request as the host on
// since the request, although it may echo the hardware from up to
// StaleReads before it: the reboot package waits such a reading out
// (UpReadFrom), OperatorHosts does not. Here the operator writes a status
// (for whatever reason) a second after the request with Ironic's cached
// "on", then Ironic powers h1 off for the request; the health checker
// clears m1's mark (its Node still reads Ready: the kubelet's grace period
// has not run out). The cancelled remediation reads PoweredOn, then its
// Node Ready, and ends Done, its admission released, while h1 is off and
// not powered on since; with MaxCount(1) m2 is admitted and the
// operator is asked to power h2 off: two hosts off at once. Ground truth:
// the stand-in operator's own log of h1's power (off after the reading,
// never on since).
func TestReview40l_OperatorStaleOnReadingReleasesWhileOff(t *testing.T) {
	ctx := context.Background()
	const stale = 5 * time.Second
	w := newOperatorWorld(t, 2, stale, nil)
	cl, rem := w.cl, w.rem

	cl.SetNeedsRemediation("m1", true)
	_, requestAt := w.firstRequest(ctx)

	// The operator writes a status a second after the request, echoing
	// Ironic's cached power state (on, read before the request); then
	// Ironic powers h1 off for the request. Truth: h1 off from here on
	// (this stand-in operator powers it on never within the test: slow).
	w.statusLater("h1", true, nil)
	h1OffAt := time.Now()
	require.Less(t, h1OffAt.Sub(requestAt), stale, "precondition: the reading is younger than StaleReads after the request")

	// The health checker clears the mark; the Node still reads Ready.
	cl.SetNeedsRemediation("m1", false)
	for i := 0; i < 6; i++ {
		_, err := rem.Reconcile(ctx, "m1")
		rec, _ := cl.Get(ctx, "m1")
		t.Logf("m1 pass: %v, phase %s", err, rec.State.Phase)
	}
	adm := w.secondUnhealthy(ctx)
	m2Req := w.requested(ctx, "h2")
	if !adm.Has("m1") || adm.Has("m2") || m2Req {
		rec, _ := cl.Get(ctx, "m1")
		t.Fatalf("limit MaxCount(1): m1's cancelled remediation ended (%s) and released its admission (admissions %v) on an on reading written %v after the request (within StaleReads %v: it may echo the host before the request), while h1 has been off since %v (ground truth, never on since); m2 admitted with its request on h2: %v",
			rec.State.Phase, adm.Machines, h1OffAt.Sub(requestAt).Round(time.Millisecond), stale, h1OffAt.Format(time.StampMilli), m2Req)
	}
}

// TestReview40l_OperatorReRequestRecordedAtStartReleasesGoneWhileOff: the
// Reconciler records a Machine's request in the admission record with At
// = State.Started (remediation/reconciler.go:294, `attempt :=
// Request{Value: d.RebootValue, At: d.State.Started, ...}`), but a
// request written again within the attempt (phased.go's request():
// "reboot request missing or replaced: request again", or after a move)
// is written at State.RequestedAt, later. A gone Machine's admission is
// kept while its host is held, read through that recorded request
// (stillHeld, OperatorHosts.ReadRequest): OperatorHosts.read's PoweredOn
// (`after(updated, req.At)`) then takes a status "on" the operator wrote
// between the attempt's start and the second request, a true reading of
// the host before it was powered off for that request, as the host on
// since the request. m1's first request is removed by hand, the operator
// writes h1 on, m1 writes its request again, the operator powers h1 off
// for it (its status not yet written: within StaleReads), m1 is deleted:
// its admission is released in that pass, and m2 admitted with its
// request on h2 (MaxCount(1)) while h1 is off. Ground truth: the stand-in
// operator's own log (h1 off after the second request, never on since).
func TestReview40l_OperatorReRequestRecordedAtStartReleasesGoneWhileOff(t *testing.T) {
	ctx := context.Background()
	const stale = 5 * time.Second
	w := newOperatorWorld(t, 2, stale, nil)
	c, cl, rem := w.c, w.cl, w.rem

	w.unhealthy("m1")
	h, _ := w.firstRequest(ctx)
	// The request is removed by hand before the operator acted on it.
	delete(h.Annotations, remediation.RebootAnnotation)
	require.NoError(t, c.Update(ctx, &h))
	// The operator writes its status: h1 on (true: it never powered it off).
	w.statusLater("h1", true, nil)
	onWritten := time.Now()
	time.Sleep(100 * time.Millisecond)
	// m1 writes its request again.
	_, err := rem.Reconcile(ctx, "m1")
	require.NoError(t, err)
	rec, err := cl.Get(ctx, "m1")
	require.NoError(t, err)
	require.True(t, rec.State.RequestedAt.After(onWritten), "precondition: the request written again after the operator's status (%+v)", rec.State)
	w.get(ctx, "h1", &h)
	require.Equal(t, remediation.RebootValue("uid-m1", rec.State.RequestedAt), h.Annotations[remediation.RebootAnnotation], "precondition: the second request is on h1")
	adm, _ := cl.GetAdmissions(ctx)
	t.Logf("recorded request %+v; state Started %v RequestedAt %v", adm.Requests["m1"], rec.State.Started, rec.State.RequestedAt)
	// The operator powers h1 off for it (ground truth); its status
	// catches up later (within StaleReads, not within this test).
	h1OffAt := time.Now()

	w.deleteMachine(ctx, "m1", 1)
	adm = w.secondUnhealthy(ctx)
	m2Req := w.requested(ctx, "h2")
	if !adm.Has("m1") || adm.Has("m2") || m2Req {
		t.Fatalf("limit MaxCount(1): gone m1's admission released (admissions %v) while h1 is off for its second request (written %v; recorded At %v, the attempt's start), powered off at %v and never on since (ground truth); the operator's status 'on' was written at %v, before that request; m2 admitted with its request on h2: %v",
			adm.Machines, rec.State.RequestedAt.Format(time.StampMilli), rec.State.Started.Format(time.StampMilli), h1OffAt.Format(time.StampMilli), onWritten.Format(time.StampMilli), m2Req)
	}
}

// TestReview40l_OperatorCancelBeforeActingHeldUntilTimeout: durations.
// kube/operator.go: the operator "writes status only when something
// changes", and a reading read now is at most StaleReads behind the
// hardware. A remediation cancelled (mark cleared, Node Ready) before the
// operator acted on its request leaves a host that never went off: the
// operator writes no new status. PoweredOn (operator.go:203) requires a
// status written after the request (`after(updated, req.At)`), never
// "on, read more than StaleReads after the request" (the evidence Fenced
// and OffAfterRequest accept for "off"), so the cancelled remediation
// waits in powering-on, admitted, for the whole Timeout (10 min by
// default): a storm-guard slot and the host lock held for a host that is
// on and was never off. Ground truth: the BareMetalHost's status (on,
// unchanged) and no request on it.
func TestReview40l_OperatorCancelBeforeActingHeldUntilTimeout(t *testing.T) {
	ctx := context.Background()
	const stale = time.Second
	w := newOperatorWorld(t, 1, stale, nil)
	cl, rem := w.cl, w.rem

	cl.SetNeedsRemediation("m1", true)
	_, err := rem.Reconcile(ctx, "m1")
	require.NoError(t, err)
	requestAt := time.Now()
	// Cancelled before the operator acted: the host stays on, its
	// status unchanged.
	cl.SetNeedsRemediation("m1", false)
	var phase remediation.Phase
	for end := time.Now().Add(stale + 4*time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_, err := rem.Reconcile(ctx, "m1")
		require.NoError(t, err)
		rec, _ := cl.Get(ctx, "m1")
		phase = rec.State.Phase
		if a, _ := cl.GetAdmissions(ctx); !remediation.InFlight(phase) && !a.Has("m1") {
			return
		}
	}
	var h metal3.BareMetalHost
	w.get(ctx, "h1", &h)
	a, _ := cl.GetAdmissions(ctx)
	t.Fatalf("cancelled m1 still %s and admitted (%v) %v after its request, %v past StaleReads, although h1 reads on (status.poweredOn %v, no request: %v) and never went off: held until the Timeout (10 min by default)",
		phase, a.Machines, time.Since(requestAt).Round(time.Millisecond), time.Since(requestAt.Add(stale)).Round(time.Millisecond), h.Status.PoweredOn, h.Annotations[remediation.RebootAnnotation] == "")
}
