package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// TestReview39g_AnsweredRequestPinLocksOutResetHost (Medium; issue 39
// round 7, against main's normalPin in reset.go). A bare reboot request
// is pending on the normal path (pinned to BMC 1) when the administrator
// sets spec.disablePowerOff: the reset path answers that very request
// (resets the host and removes the annotation), but writeReset keeps the
// normal path's pin because the record's status still says "pending" -
// and it says so for good, since the normal path never runs on a
// reset-only host. The reboot is no longer asked for by anyone, yet its
// pin stays. When the host's BMC is later changed (the BMC was replaced;
// no admission policy), the next pass reads the old pinned BMC with the
// host's credentials, and marks the record BMCChanged: the host is locked
// out (every pass ErrBMCChanged, a new request never answered) by the pin
// of a reboot no longer asked for. doc.go: "A host is thus never locked
// out by the pin of a reboot no longer asked for". A host that had no
// reset detour (the request answered on the normal path) drops its pin
// and uses the new BMC. Ground truth: the record read directly, the old
// BMC's own call log, the new BMC's call log.
func TestReview39g_AnsweredRequestPinLocksOutResetHost(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv2 := redfishBMC(t, hw2)
	w := newBusyPinWorld(t, ctx)
	direct, ns, mgr, powers := w.direct, w.ns, w.mgr, w.powers
	// newView is the start of the first pass whose power controller may
	// have been made from BMC 2 (the controller's cache showed it when
	// Powers.Controller returned). The passes of one host never overlap,
	// so every pass made from BMC 1 before the change (an idle pass that
	// read the host just before it: legitimately calls BMC 1) ended
	// before then, and a call to BMC 1 after it is one made after the
	// change was seen: what the test is about. (The test took the time
	// of its own write instead, and failed about 1 run in 3 on such an
	// idle pass.)
	// A pass whose cache showed BMC 1 before Powers.Controller and BMC 2
	// after it may have been made from either: from BMC 1 if it got a
	// power controller (it may call BMC 1), from BMC 2 if it was refused
	// (it may have read BMC 1 inside Controller: the bug).
	var newView atomic.Pointer[time.Time]
	seesNew := func(name string) bool {
		var b metal3.BareMetalHost
		return mgr.GetClient().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &b) == nil && b.Spec.BMC.Address == redfishAt(srv2)
	}
	powerOf := func(name string) (power.Controller, error) {
		start := time.Now()
		before := newView.Load() == nil && seesNew(name)
		pc, err := powers.Controller(name)
		if newView.Load() == nil && (before || (err != nil && seesNew(name))) {
			newView.CompareAndSwap(nil, &start)
		}
		return pc, err
	}
	w.start(ctx, cancel, powerOf)
	rec, record := w.rec, func() v1alpha1.RebootRecord { return w.record(ctx) }
	// A bare reboot request; its Off is refused (busy): pending, pinned.
	w.requestPinned(ctx, 20*time.Second)
	// The administrator makes the host reset-only; the reset path answers
	// the request (and removes it).
	w.busy.Store(false)
	w.resetOnly(ctx, 20*time.Second)
	r1 := record()
	t.Logf("after the reset path answered the only request: pin %+v, mark %+v, status %s", r1.Spec.BMC, r1.Spec.BMCChanged, r1.Spec.Status)
	// No request is left. The BMC is replaced (the host now answers on BMC 2).
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	time.Sleep(2 * time.Second)
	// A new reset request.
	w.request(ctx, "again")
	// Since issue 39 round 8 a BMC changed with no admission policy is
	// used only once an administrator accepts it (the record keeps the
	// host's last BMC even with no reboot pending): the host is marked,
	// with no call to either BMC, and the administrator accepts it.
	acceptBMC(t, ctx, direct, ns, "h1", 10*time.Second)
	answered := w.answered(ctx)
	require.NotNil(t, newView.Load(), "a pass saw the changed BMC")
	changed := *newView.Load()
	old := callsAfter(w.hw1, changed)
	r2 := record()
	require.Nil(t, r2.Spec.BMCChanged, "the host is locked out (marked BMCChanged) by the pin of a reboot whose only request the reset path answered "+
		"(pin %+v, status %s; %d calls to the old BMC after the change); events %q", r1.Spec.BMC, r2.Spec.Status, old, drainEvents(rec))
	require.Zero(t, old, "the host's credentials went to its old BMC after the change")
	require.True(t, answered, "a request made after the BMC change is never answered (%d calls on the new BMC); events %q", len(hw2.Calls()), drainEvents(rec))
}

// TestReview39g_StaleReportedOffOfPinnedBMCActedOn (Medium; issue 39
// round 7, against main's pinnedReadOffFresh in bmcpinread.go). Round 6's
// fix acts on a pinned Off only if the reading began at most 2 s before
// the pass that uses it, on the premise that the reading shows the power
// as it was when it began. A BMC that reports its power state stale (the
// project's own model: fake.Report.Stale, "as sushy-tools and iDRAC do";
// reboot.Config.StaleReads / Powers.StaleReads exist for exactly this)
// answers a brand-new reading with the state from before a power-on. The
// host's pending reboot is pinned to its real BMC A (which reports up to
// 3 s stale; Powers.StaleReads is 5 s, so the operator told rebootkit);
// the requests are gone and spec.bmc names another endpoint B (no
// admission policy). The host was powered on a second ago and runs. A
// fast, fresh reading of A (begun within the pass) says Off: checkPin
// takes it as "the pinned BMC reads Off" and returns nil (B is used, B
// gets the credentials, no BMCChanged mark, the pass drops the pin)
// while the host has been running. Ground truth: hw1.WasOffDuring since
// the power-on.
func TestReview39g_StaleReportedOffOfPinnedBMCActedOn(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Report: fake.Report{Stale: 3 * time.Second}})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := redfishBMC(t, hw1)
	srv2 := redfishBMC(t, hw2)
	newCredentialedBMH(t, ctx, admin, ns, "h1", srv1)
	bmh := pinPending(t, ctx, admin, ns, "h1", srv1)
	// The pending reboot powered the host off; later it is powered on
	// (through A, out of band) and runs.
	require.NoError(t, hw1.Off(ctx, power.ModeHard))
	time.Sleep(3500 * time.Millisecond)
	hw1.OutOfBandOn()
	on := time.Now()
	// The requests are gone and spec.bmc names B.
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	time.Sleep(time.Second)
	p := directPowers(t, admin, ns, 5*time.Second)
	start := time.Now()
	err := p.checkPin(ctx, &bmh)
	for errors.Is(err, ErrInFlight) && time.Since(start) < 2*time.Second {
		time.Sleep(50 * time.Millisecond)
		err = p.checkPin(ctx, &bmh)
	}
	now := time.Now()
	t.Logf("checkPin a second after the power-on: %v (%s)", err, now.Sub(start))
	require.False(t, hw1.WasOffDuring(on.Add(100*time.Millisecond), now), "setup: hw1 ran throughout")
	require.False(t, err == nil, "checkPin took the pinned BMC's stale Off (a reading begun %s ago, of a host running for %s) as Off: "+
		"B is used, its credentials sent, no BMCChanged mark, the pin dropped (bmcpinread.go: pinnedReadOffFresh ignores StaleReads)",
		now.Sub(start), now.Sub(on))
}
