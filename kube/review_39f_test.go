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
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview39f_StalePinnedOffUsedWhileHostRuns (issue 39 round 6, against
// 740cfed's background pinned read, bmcpinread.go). A host's pending
// reboot is pinned to its real BMC A; the requests are gone and spec.bmc
// names another endpoint B (no admission policy in force), so checkPin
// reads A in the background. A is slow (400 ms, less than many real
// BMCs), so the pass gets ErrInFlight and the reading, Off at that
// instant, is kept "for the host's next pass" (pinnedReadFresh, 30 s).
// Then the host is powered on (out of band here: an operator, the BMC's
// power-restore policy; the controller itself through A after a restore
// of spec.bmc works the same, the kept reading is not tied to it). The
// next pass, a second later, takes the kept Off as "the pinned BMC reads
// Off": checkPin returns nil (B is used, B gets the credentials, no
// BMCChanged mark, and the pass drops the pin) although A's host has been
// running since. doc: "if it reads Off (the pending reboot may have
// powered the host off), the BMC is used to power the host back on";
// otherwise "the pin is dropped and the record marked BMCChanged".
// Ground truth: hw1.WasOnAt over the whole span since the power-on.
func TestReview39f_StalePinnedOffUsedWhileHostRuns(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	var slow atomic.Bool
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpState && slow.Load() {
			time.Sleep(400 * time.Millisecond)
		}
		return fake.Fault{}
	}})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := redfishBMC(t, hw1)
	srv2 := redfishBMC(t, hw2)
	newCredentialedBMH(t, ctx, admin, ns, "h1", srv1)
	bmh := pinPending(t, ctx, admin, ns, "h1", srv1)
	// The pending reboot powered the host off; the requests are gone and
	// spec.bmc names B.
	require.NoError(t, hw1.Off(ctx, power.ModeHard))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	p := directPowers(t, admin, ns, 0)
	slow.Store(true)
	err := p.checkPin(ctx, &bmh)
	require.ErrorIs(t, err, ErrInFlight, "the slow pinned read should be left running")
	time.Sleep(1500 * time.Millisecond) // the reading ends: Off
	slow.Store(false)
	// The host is powered on (through A, out of band) and runs.
	hw1.OutOfBandOn()
	on := time.Now()
	time.Sleep(time.Second)
	require.True(t, hw1.WasOnAt(on.Add(100*time.Millisecond)), "setup: hw1 should be running")
	err = p.checkPin(ctx, &bmh)
	now := time.Now()
	t.Logf("checkPin a second after the power-on: %v", err)
	runs := !hw1.WasOffDuring(on.Add(100*time.Millisecond), now)
	require.True(t, runs, "setup: hw1 ran throughout")
	require.False(t, err == nil, "checkPin took the pinned BMC's reading as Off (B is used, its credentials sent, no BMCChanged mark, "+
		"the pin dropped) while the host had been running for a second: the reading was kept from before the power-on (bmcpinread.go, pinnedReadFresh)")
	require.True(t, errors.Is(err, ErrBMCChanged) || errors.Is(err, ErrInFlight), "got %v", err)
}

// TestReview39f_DisablePowerOffFlipMarksUnchangedBMC (issue 39 round 6,
// against 740cfed's "a pending reboot whose pin is missing is marked"). An
// administrator sets spec.disablePowerOff on a host whose reboot is
// pending on the normal path (its Off is refused: the BMC is busy), then
// clears it again. spec.bmc never changes. (Observed: the mark is written
// already while the host is on the reset path, by the reset path's own
// pass once its reset is done: the flip back is not even needed.) The reset path rewrites the
// record's spec.bmc for its own state (reset.go writeReset: the reset's
// pin, or nil), while spec.status still holds the normal path's pending
// reboot. Back on the normal path, the pending reboot has no pin of its
// own: checkPin / nextPin mark the record with a mark that names no BMC,
// and every pass of the host fails with ErrBMCChanged until an
// administrator names, in the record, the BMC the host has had all along.
// A request made afterwards never reaches the BMC. doc.go: the mark is
// for "a pending reboot whose pin is missing (removed with the mark, or a
// record of a version without pins)"; "a host is thus never locked out by
// the pin of a reboot no longer asked for". Ground truth: the host read
// directly (spec.bmc unchanged), the record read directly, hw1's calls.
func TestReview39f_DisablePowerOffFlipMarksUnchangedBMC(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newBusyPinWorld(t, ctx)
	direct, ns := w.direct, w.ns
	w.start(ctx, cancel, w.powers.Controller)
	rec, record := w.rec, func() v1alpha1.RebootRecord { return w.record(ctx) }
	// A reboot request; its Off is refused (busy): pending, pinned.
	w.requestPinned(ctx, 10*time.Second)
	pin0 := record().Spec.BMC.DeepCopy()
	// The administrator makes the host reset-only; the reset path answers
	// the request.
	w.resetOnly(ctx, 15*time.Second)
	r1 := record()
	t.Logf("after the reset path: pin %+v (was %+v) mark %+v status %s", r1.Spec.BMC, pin0, r1.Spec.BMCChanged, r1.Spec.Status)
	// ... and clears spec.disablePowerOff again; the BMC answers again.
	w.busy.Store(false)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = false }))
	time.Sleep(2 * time.Second)
	second := time.Now()
	w.request(ctx, "again")
	answered := w.answered(ctx)
	calls := callsAfter(w.hw1, second)
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
	r2 := record()
	require.Equal(t, redfishAt(w.srv1), h.Spec.BMC.Address, "spec.bmc never changed")
	require.Nil(t, r2.Spec.BMCChanged, "the record is marked BMCChanged though spec.bmc never changed (record status %s, pin %+v); events %q",
		r2.Spec.Status, r2.Spec.BMC, drainEvents(rec))
	require.True(t, answered, "a request made after the flip back is never answered (%d BMC calls since); events %q", calls, drainEvents(rec))
}

// TestReview39f_PinnedReadOutlivesDeletedHost (Low; issue 39 round 6,
// against 740cfed's Powers.pinned). A host's pinned BMC reading that
// ended after its pass stopped waiting stays in Powers.pinned until that
// host's next pinned read: a host deleted meanwhile keeps its entry for
// good (Powers.Controller forgets a deleted host's pool session, issue
// 35, but not this), so the map grows with every host ever deleted or
// restored while a reading ran. Ground truth: the map itself, after the
// host is gone from the API server.
func TestReview39f_PinnedReadOutlivesDeletedHost(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpState {
			time.Sleep(400 * time.Millisecond)
		}
		return fake.Fault{}
	}})
	srv1 := redfishBMC(t, hw1)
	newCredentialedBMH(t, ctx, admin, ns, "h1", nil)
	bmh := pinPending(t, ctx, admin, ns, "h1", srv1)
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "redfish+http://127.0.0.1:1/redfish/v1/Systems/1" }))
	p := directPowers(t, admin, ns, 0)
	_, err := p.Controller("h1")
	require.ErrorIs(t, err, ErrInFlight, "premise: the pinned reading outlives the pass")
	require.NoError(t, admin.Delete(ctx, &bmh))
	require.Eventually(t, func() bool {
		_, err := p.Controller("h1")
		return err != nil && errors.Is(err, reboot.ErrNotFound)
	}, 10*time.Second, 100*time.Millisecond, "premise: the host is gone")
	time.Sleep(time.Second) // the reading has ended
	p.mu.Lock()
	_, kept := p.pinned["h1"]
	p.mu.Unlock()
	require.False(t, kept, "the deleted host's pinned reading is kept in Powers.pinned for good")
}
