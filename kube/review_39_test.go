package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// review39Env starts a reboot controller over the fake hardware hw (the
// Reconciler's Power is hw itself: no emulator) for namespace ns.
func review39Env(t *testing.T, ctx context.Context, ns string, hw *fake.Power, cfg reboot.Config) *events.FakeRecorder {
	t.Helper()
	rec, _ := fakePowerEnv39(t, ctx, "reboot-"+ns, ns, hw, nil, cfg, 10000)
	return rec
}

// TestReview39_LostResetAnswerResetsForEver: the doc (kube/doc.go, "Hosts
// whose power never goes off"; decideReset's comment) says a reset whose
// outcome is unknown is sent again StaleReads later, "such a request may
// reset the host twice". With a BMC that carries out every reset but
// whose answer never arrives (on NC-SI hardware the reset takes the
// BMC's shared port down with the host's NIC, so the answer is the very
// thing that gets lost), the controller resets the host again every
// max(StaleReads, RetryDelay), for ever: the host never gets to finish
// booting, and the request is never done nor given up. Ground truth:
// fake power's Resets().
func TestReview39_LostResetAnswerResetsForEver(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpReset {
			return fake.Fault{Kind: fake.FaultTimeout, Applied: true} // carried out; the answer is lost
		}
		return fake.Fault{}
	}}, resetOnly39)
	const stale = 300 * time.Millisecond
	review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})

	start := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	time.Sleep(20 * stale)
	resets := hw.Resets()
	assert.False(t, hw.WasOffDuring(start, time.Now()), "never off")
	assert.LessOrEqual(t, len(resets), 2,
		"one request reset the host %d times in %v (every StaleReads, without end): %v", len(resets), 20*stale, resets)
}

// TestReview39_LeftoverResetStateAnswersNewRequest: Done removes the bare
// request from the host first and clears the record's ResetAnnotation in a
// second write (kube/reset.go reconcileReset, case d.Done). A controller
// that stops between the two writes (a crash, a lost lease, the second
// write failing) leaves the record with a pending, accepted reset. The
// next bare request made before the controller's next pass of the host
// (here: present when it starts) is then "done" at once from that old
// state: the request is removed, a Reset event says the host was reset,
// and no reset is ever sent for it (ground truth: Resets() empty). A
// rolling reboot is told that the host rebooted when it did not.
func TestReview39_LeftoverResetStateAnswersNewRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmh := newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))

	// What the Done pass of an earlier request left when it stopped after
	// its first write: the host's request removed, the record's state not
	// yet cleared (an accepted reset a minute ago).
	old := time.Now().Add(-time.Minute)
	st := resetRecord{Since: old, Sending: old.Add(time.Second), Accepted: old.Add(2 * time.Second), Op: "reset"}
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, direct.Create(ctx, &v1alpha1.RebootRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1", Annotations: map[string]string{ResetAnnotation: string(raw)}},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address,
			CredentialsName: bmh.Spec.BMC.CredentialsName, PendingSince: st.Since.UTC().Format(time.RFC3339Nano)}},
	}))
	// A new request, made before the controller's next pass.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	start := time.Now()
	const stale = 300 * time.Millisecond
	review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})

	var removed time.Time
	for deadline := time.Now().Add(10 * time.Second); removed.IsZero() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var h metal3.BareMetalHost
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
		if _, ok := h.Annotations[reboot.Annotation]; !ok {
			removed = time.Now()
		}
	}
	require.False(t, removed.IsZero(), "the request was never done")
	resets := hw.Resets()
	require.NotEmpty(t, resets, "the new request was removed %v after the controller started with no reset sent for it (ground truth: no reset, never off: %v)",
		removed.Sub(start), !hw.WasOffDuring(start, time.Now()))
	assert.True(t, resets[0].After(start))
}

// TestReview39_HoldReleasedAfterDisablePowerOffLeavesHostOff: a host
// held off by a keyed request (fenced, the normal path) that then gets
// spec.disablePowerOff (an administrator marking the hardware NC-SI)
// stays off for good once the keyed request is removed: the reset path
// (kube/reset.go reconcileReset) powers a host on only for a pending bare
// request, and nothing else of the controller looks at it any more. On
// the normal path the removal of the hold powers the host on. Ground
// truth: fake power's Truth.
func TestReview39_HoldReleasedAfterDisablePowerOffLeavesHostOff(t *testing.T) {
	needAPIServer(t)
	// "normal" is the control (passes): the same hold released without
	// the flip of spec.disablePowerOff powers the host on.
	for _, flip := range []bool{false, true} {
		name := map[bool]string{false: "normal", true: "disablePowerOff-set-while-held"}[flip]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, nil)
			const stale = 300 * time.Millisecond
			review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})

			require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
				metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
			}))
			require.Eventually(t, func() bool { return !hw.HardwareOn() }, 10*time.Second, 20*time.Millisecond, "held off")
			time.Sleep(2 * stale)
			require.False(t, hw.HardwareOn())

			if flip {
				require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
				time.Sleep(2 * stale)
			}
			require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
				delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
			}))
			assert.Eventually(t, hw.HardwareOn, 5*time.Second, 20*time.Millisecond,
				"the hold was released and the host (spec.online true) stays off: truth %v, calls %v", hw.Truth(), hw.Calls())
		})
	}
}

// TestReview39_FlipLeavesResetStateThatAnswersLaterRequest: the same
// leftover state reached with no crash. A reset is accepted for a host's
// request; before it is done an administrator clears
// spec.disablePowerOff, and the normal path finishes the request with a
// power cycle (it never touches the record's ResetAnnotation). When the
// field is set again together with the host's next bare request (one
// apply, so no pass of the host without a request in between), that
// request is removed at once from the old accepted reset: no reset is sent
// for it (ground truth).
func TestReview39_FlipLeavesResetStateThatAnswersLaterRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	const stale = time.Second
	review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	request := func() {
		require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
			metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, `{"mode":"hard"}`)
		}))
	}
	gone := func() bool {
		var h metal3.BareMetalHost
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
		_, ok := h.Annotations[reboot.Annotation]
		return !ok
	}
	request()
	require.Eventually(t, func() bool {
		var rec v1alpha1.RebootRecord
		if direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &rec) != nil {
			return false
		}
		var st resetRecord
		return json.Unmarshal([]byte(rec.Annotations[ResetAnnotation]), &st) == nil && st.accepted()
	}, 5*time.Second, 10*time.Millisecond, "reset accepted and persisted")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = false }))
	require.Eventually(t, gone, 20*time.Second, 20*time.Millisecond, "the normal path finishes the request")
	require.Eventually(t, hw.HardwareOn, 10*time.Second, 20*time.Millisecond)
	require.Len(t, hw.Resets(), 1)

	// The field set again together with the next request (one apply), so
	// that no pass sees the host without a request in between.
	time.Sleep(stale)
	asked := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.DisablePowerOff = true
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, `{"mode":"hard"}`)
	}))
	require.Eventually(t, gone, 20*time.Second, 20*time.Millisecond, "the second request is done")
	resets := hw.Resets()
	assert.True(t, len(resets) == 2 && resets[1].After(asked),
		"the second request was removed %v after it was made with no reset for it (ground truth resets %v, off since: %v)",
		time.Since(asked), resets, hw.WasOffDuring(asked, time.Now()))
}

// hangingResetter is a BMC whose calls, Reset included, block until
// released.
type hangingResetter struct{ *hangs }

func (h hangingResetter) Reset(ctx context.Context) error { return h.wait(ctx) }

// TestReview39_AsyncLateResetOutcomesOutliveHosts (Low): a Reset that
// outlives its pass leaves its outcome in Async.resets (kube/async.go
// asyncController.Reset) until a later pass of the same host with a bare
// request takes it (reconcileReset). A host deleted meanwhile (or whose
// request is removed and never made again) keeps its entry for the life
// of the process: forgetting the host (RebootController.forget, as its
// NotFound reconcile does) does not drop it, so the map grows with every
// host name that ever had a late reset.
func TestReview39_AsyncLateResetOutcomesOutliveHosts(t *testing.T) {
	h := hangingResetter{&hangs{release: make(chan struct{})}}
	ended := make(chan string, 1000)
	a := &Async{Wait: 5 * time.Millisecond, Done: func(n string) { ended <- n },
		Power: func(string) (power.Controller, error) { return h, nil }}
	c := &RebootController{Async: a, Reconciler: &reboot.Reconciler{Power: a.Controller}}
	const n = 200
	for i := range n {
		pc, err := a.Controller(fmt.Sprintf("h%d", i))
		require.NoError(t, err)
		require.ErrorIs(t, pc.(power.Resetter).Reset(context.Background()), ErrInFlight)
	}
	close(h.release)
	for range n {
		<-ended
	}
	for i := range n {
		c.forget(fmt.Sprintf("h%d", i)) // each host deleted
	}
	a.mu.Lock()
	left := len(a.resets)
	a.mu.Unlock()
	assert.Zero(t, left, "late reset outcomes kept for %d deleted hosts", left)
}

// TestReview39_ResetPathPowersOnOfflineHost: a host with
// spec.disablePowerOff and spec.online false (the controller reports
// spec.online false as refused, but nothing else stops it: with no
// operator, NoOperator mode, no webhook refuses the pair) that is off (a
// person switched it off for service) is powered ON by a bare reboot
// request: decideReset (kube/resetdecide.go resend, case StateOff) sends
// "on" StaleReads after the request, whatever spec.online says. The
// normal path never powers on a host whose spec.online is false (reboot.
// Decide holds it off); rebootkit here powers on a host its owner wants
// off. Ground truth: fake power's Truth.
func TestReview39_ResetPathPowersOnOfflineHost(t *testing.T) {
	needAPIServer(t)
	// "normal" is the control (passes): without spec.disablePowerOff the
	// same request leaves the host off.
	for _, disable := range []bool{false, true} {
		t.Run(map[bool]string{false: "normal", true: "disablePowerOff"}[disable], func(t *testing.T) {
			ctx := context.Background()
			direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{Initial: power.StateOff}, nil)
			require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
				h.Spec.DisablePowerOff = disable
				h.Spec.Online = false
			}))
			const stale = 300 * time.Millisecond
			review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
			start := time.Now()
			require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
				metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
			}))
			time.Sleep(10 * stale)
			assert.False(t, hw.HardwareOn(), "spec.online is false and the host was off: a reboot request powered it on (truth %v, calls %v)", hw.Truth(), hw.Calls())
			assert.True(t, hw.WasOffDuring(start, time.Now()))
		})
	}
}

// loseAfter is a reboot.Guard that is held for its first n Holds and lost
// once the n-th one ends (a leader paused right after its write, whose
// lease another replica then takes).
type loseAfter struct {
	mu    sync.Mutex
	n     int
	holds int
	lost  bool
}

func (g *loseAfter) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost {
		return nil, nil, reboot.ErrNotLeader
	}
	g.holds++
	last := g.holds == g.n
	ctx, cancel := context.WithCancel(ctx)
	return ctx, func() {
		cancel()
		if last {
			g.mu.Lock()
			g.lost = true
			g.mu.Unlock()
		}
	}, nil
}

// TestReview39_ResetNotFencedByGuard: reboot.Reconciler.Guard "fences
// every store write and power call by this process's leadership", and the
// normal path holds it around its power calls (reboot/reconciler.go,
// hold before the call). The reset path holds it only around its record
// writes (kube/reset.go reconcileReset: write(...)), then sends the reset
// (sendReset) with no Hold: a process whose leadership ended right after
// its write of Sending resets the host all the same. The kube binary also
// wraps the controllers in LeaseGuard.Wrap, which covers it there; a
// library user who fences with the Guard alone (etcd.Leadership.Guard, as
// the reboot package documents) is not covered. Ground truth: Resets().
func TestReview39_ResetNotFencedByGuard(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	// Hold 1: the write of Since; hold 2: the write of Sending, after which
	// the leadership is gone.
	g := &loseAfter{n: 2}
	_, _ = fakePowerEnv39(t, ctx, "reboot-"+ns, ns, hw, g,
		reboot.Config{StaleReads: 300 * time.Millisecond, RetryDelay: 300 * time.Millisecond, SoftTimeout: time.Second}, 1000)

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.lost }, 5*time.Second, 10*time.Millisecond, "the two writes happen")
	time.Sleep(time.Second)
	assert.Empty(t, hw.Resets(), "a reset was sent after this process's leadership ended (guard holds %d)", g.holds)
}
