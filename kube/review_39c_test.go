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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview39c_OtherWriteBySameClientResetsAgain: the reset path takes a
// request for a new one when the managedFields time of a manager that owns
// it is later than the recorded one (kube/resetrequest.go answers:
// "!cur.At.After(r.At)"). But the API server bumps a manager's entry time
// on any field that manager adds or changes, not only on a change of the
// request. A client (one field manager: kubectl annotate, rebootctl) that
// made the bare request and, while it is pending, adds any other
// annotation, here a keyed request the reset path refuses with
// PowerOffRefused, makes the pending request look new: its state is
// dropped (Resets back to 0, kube/reset.go reconcileReset "this request
// starts afresh") and the host is reset a second time for one request
// whose first reset the BMC accepted. Ground truth: fake power's Resets().
func TestReview39c_OtherWriteBySameClientResetsAgain(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	const stale = 3 * time.Second
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	kubectl := client.WithFieldOwner(direct, "kubectl-annotate")
	start := time.Now()
	require.NoError(t, change(ctx, kubectl, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { return len(hw.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "the request's reset")
	time.Sleep(1200 * time.Millisecond) // the next whole second of managedFields; the request still waits for StaleReads
	// The same client adds a keyed request (refused on this path: PowerOffRefused).
	require.NoError(t, change(ctx, kubectl, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"mine", "")
	}))
	deadline := time.Now().Add(4 * stale)
	for time.Now().Before(deadline) {
		if _, ok := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]; !ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
	assert.False(t, pending, "the request was answered")
	assert.False(t, hw.WasOffDuring(start, time.Now()), "never off")
	assert.Len(t, hw.Resets(), 1, "one request, one reset the BMC accepted: the host was reset %d times (%v) because the client that made "+
		"the request added another annotation; events %q", len(hw.Resets()), hw.Resets(), drainEvents(rec))
}

// TestReview39c_BusyClientResetsForEver: the same hole with a client
// that keeps writing the host (a label it owns, every 1.2 s, e.g. an
// inventory agent that also made the request): every write makes the
// pending request look new, so its state starts afresh with Resets 0 and
// the host is reset again each StaleReads, for ever: maxResets (2 per
// request, kube/resetdecide.go) bounds nothing and the request is never
// done. Ground truth: fake power's Resets().
func TestReview39c_BusyClientResetsForEver(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	const stale = 1500 * time.Millisecond
	_, _ = review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	agent := client.WithFieldOwner(direct, "inventory-agent")
	require.NoError(t, change(ctx, agent, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(1200 * time.Millisecond):
			}
			_ = change(ctx, agent, ns, "h1", func(h *metal3.BareMetalHost) { h.Labels["seen"] = fmt.Sprint(i) })
		}
	}()
	time.Sleep(10 * stale)
	cancel()
	<-done
	assert.LessOrEqual(t, len(hw.Resets()), 2, "one request: at most maxResets resets; the host was reset %d times: %v", len(hw.Resets()), hw.Resets())
}

// TestReview39c_ReRequestInTheSameSecondAnsweredByOldReset: a request's
// identity compares managedFields times, which are whole seconds
// (kube/resetrequest.go answers: "!cur.At.After(r.At)"). A request removed
// and made again by the same client with the same value within the second
// of the first (here while the controller restarts; equally a pass that
// never saw it gone) has the identity of the first: the marker is still
// the first's, so the new request is answered by the reset the BMC
// accepted before it was made, and removed with no reset after it.
// Ground truth: fake power's Resets() against the instant of the second
// request.
func TestReview39c_ReRequestInTheSameSecondAnsweredByOldReset(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	const stale = 3 * time.Second
	cfg := reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}
	_, stop := review39bEnv(t, "reboot-"+ns, ns, hw, cfg)
	kubectl := client.WithFieldOwner(direct, "kubectl-annotate")
	time.Sleep(2 * time.Second) // the controller's cache is up
	// Start just after a whole second, so that all of the below fits in it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	first := time.Now()
	require.NoError(t, change(ctx, kubectl, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { return len(hw.Resets()) == 1 }, 10*time.Second, 5*time.Millisecond, "first request's reset")
	t.Logf("reset after %v", time.Since(first))
	time.Sleep(150 * time.Millisecond) // its acceptance persisted
	stop()
	t.Logf("stopped after %v", time.Since(first))
	require.NoError(t, change(ctx, kubectl, ns, "h1", func(h *metal3.BareMetalHost) { delete(h.Annotations, reboot.Annotation) }))
	second := time.Now()
	require.NoError(t, change(ctx, kubectl, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Equal(t, first.Truncate(time.Second), time.Now().Truncate(time.Second), "premise: both requests in one second (first %v, second %v)", first, second)

	rec, _ := review39bEnv(t, "reboot2-"+ns, ns, hw, cfg)
	deadline := time.Now().Add(4 * stale)
	for time.Now().Before(deadline) {
		if _, ok := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]; !ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
	var after []time.Time
	for _, r := range hw.Resets() {
		if r.After(second) {
			after = append(after, r)
		}
	}
	time.Sleep(200 * time.Millisecond)
	assert.False(t, pending, "the second request was answered")
	assert.NotEmpty(t, after, "the second request (made at %v) was removed as done with no reset after it: resets %v, events %q",
		second, hw.Resets(), drainEvents(rec))
	assert.False(t, hw.WasOffDuring(first, time.Now()), "never off")
}

// TestReview39c_HoldBrokenAfterFlipStaysFenced: a remediation's keyed
// request held a host off (fencing evidence in the record), then
// spec.disablePowerOff is set, then someone powers the held host on
// behind the controller. On the normal path (the control subtest) the
// controller records Status.HoldBroken and powers it off again, so the
// remediation's view (remediation/reboothosts.go: Fenced && !broken)
// turns false. The reset path (kube/reset.go reconcileReset) only
// refuses the keyed request and leaves the record's reboot status alone:
// HoldBroken is never written, the evidence of the old power-off stays,
// and the remediation's Fenced stays true while the host runs processes
// started after the request (issue 39 point 8: a Node deleted while its
// host runs fresh processes). Ground truth: the fake's hardware.
func TestReview39c_HoldBrokenAfterFlipStaysFenced(t *testing.T) {
	needAPIServer(t)
	for _, flip := range []bool{false, true} {
		name := map[bool]string{false: "normal", true: "disablePowerOff-set-while-held"}[flip]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, nil)
			const stale = 300 * time.Millisecond
			review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
			const ann, val = reboot.AnnotationPrefix + "fencer", `{"mode":"hard"}`
			at := time.Now()
			require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
				metav1.SetMetaDataAnnotation(&h.ObjectMeta, ann, val)
			}))
			store := &RebootHosts{Client: direct, Namespace: ns}
			tk := reboot.Ticket{Host: "h1", Annotation: ann, Value: val, At: at}
			// The remediation's predicate (remediation.RebootAPIHosts.Get).
			fenced := func() (bool, reboot.Status) {
				h, err := store.Get(ctx, "h1")
				require.NoError(t, err)
				broken := h.Status.HoldBroken.After(h.Status.LastPoweredOff) && h.Status.HoldBroken.After(at)
				return reboot.FencedFor(h.Status, tk, time.Now()) && !broken, h.Status
			}
			require.Eventually(t, func() bool { f, _ := fenced(); return f }, 10*time.Second, 20*time.Millisecond, "fenced")
			if flip {
				require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
				time.Sleep(2 * stale)
			}
			hw.OutOfBandOn() // someone powers the held host on
			brokenAt := time.Now()
			time.Sleep(5 * stale)
			f, st := fenced()
			if f {
				assert.False(t, hw.WasOnAt(time.Now()) && hw.WasOnAt(brokenAt.Add(stale)),
					"the remediation reads Fenced (hold not broken) while the host runs since %v: status %+v, truth %v", brokenAt, st, hw.Truth())
			}
		})
	}
}

// refuseCalls is a reboot.Guard that refuses the Hold of the reset path's
// call (the record read directly shows a Sending of a reset this guard
// has not refused yet: the write of it just happened) the first n times:
// leadership lost for a moment between the write and the call, and
// regained (or held by the next leader) at once.
type refuseCalls struct {
	t       *testing.T
	c       client.Client
	ns      string
	n       int
	mu      sync.Mutex
	refused map[time.Time]bool
}

func (g *refuseCalls) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	var rec v1alpha1.RebootRecord
	if g.c.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: "h1"}, &rec) == nil {
		var st resetRecord
		if json.Unmarshal([]byte(rec.Annotations[ResetAnnotation]), &st) == nil && st.Op == "reset" && !st.Sending.IsZero() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if !g.refused[st.Sending] && len(g.refused) < g.n {
				g.refused[st.Sending] = true
				return nil, nil, reboot.ErrNotLeader
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, nil
}

// TestReview39c_ResetRefusedForLeadershipCounts: doc.go says a reset
// "never sent" (a refusal for leadership among them) does not count, and
// resetRefused lists reboot.ErrNotLeader. But when the Guard refuses the
// call itself after the write of Sending (kube/reset.go reconcileReset:
// "if errors.Is(cerr, reboot.ErrNotLeader) { return ... }" before
// noteReset), nothing records the refusal: the next pass takes the reset
// for one of unknown outcome, counts it, and after two such moments the
// controller gives up with ResetOutcomeUnknown ("it may have been reset")
// although no reset ever reached the BMC, and sends no more. Ground truth:
// fake power's Resets() and Calls().
func TestReview39c_ResetRefusedForLeadershipCounts(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	g := &refuseCalls{t: t, c: direct, ns: ns, n: 2, refused: map[time.Time]bool{}}
	const stale = 300 * time.Millisecond
	rec, _ := fakePowerEnv39(t, ctx, "reboot-"+ns, ns, hw, g, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}, 1000)

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	time.Sleep(15 * stale)
	evs := drainEvents(rec)
	g.mu.Lock()
	refused := len(g.refused)
	g.mu.Unlock()
	require.Equal(t, 2, refused, "premise: two calls refused for leadership")
	assert.NotEmpty(t, hw.Resets(), "two resets refused for leadership (never sent) and the leadership back: the host was never reset; "+
		"calls %v, events %q", hw.Calls(), evs)
	for _, e := range evs {
		assert.NotContains(t, e, "ResetOutcomeUnknown", "no reset was ever sent: its outcome is known")
	}
}

// TestReview39c_BMCReplacedAfterRequestLocksHostOut: a reset request is
// pending on a host's BMC; the administrator replaces the BMC (a new
// spec.bmc.address; the reboot-client admission policy is not installed)
// and removes the request in one write. Round 3 found the old pin kept for
// good (the host locked out). Since round 8 (issue 39: a reboot client
// can make the same write, and the controller must send the new BMC no
// credentials unless an identity with more than the reboot-client role
// made the change) the host is marked BMCChanged, with no call to the
// new BMC, until the administrator accepts the new BMC in the record's
// mark (acceptCommand); then the old pin is gone and a request made
// after the replacement reaches the new BMC. Before round 8 this test
// asserted the new BMC was used with no acceptance, which is the hole of
// TestReview39h_ResetRequestWithdrawnWithRedirectSendsCredentials.
// Ground truth: the new BMC's own hardware log.
func TestReview39c_BMCReplacedAfterRequestLocksHostOut(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const stale = 5 * time.Second // the first request stays pending
	w := startPinWorld39(t, ctx, pinOpts39{host: func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }, stale: stale})
	direct, ns, hw1, hw2, srv2, rec := w.direct, w.ns, w.hw1, w.hw2, w.srv2, w.rec

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { return len(hw1.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "the first request's reset")
	// The administrator replaces the BMC and withdraws the request.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.Annotation)
	}))
	replaced := time.Now()
	acceptBMC(t, ctx, direct, ns, "h1", 10*time.Second)
	require.Empty(t, hw2.Calls(), "the new BMC was called before it was accepted (replaced at %s)", replaced.Format(time.RFC3339Nano))
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMCChanged == nil
	}, 10*time.Second, 20*time.Millisecond, "the accepted mark goes")
	pinned := record.Spec.BMC != nil
	// A new request, made after the replacement.
	second := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "again")
	}))
	time.Sleep(3 * time.Second)
	var after []time.Time
	for _, r := range hw2.Resets() {
		if r.After(second) {
			after = append(after, r)
		}
	}
	assert.False(t, pinned, "no reboot was pending, yet the record still pins the old BMC: %+v", record.Spec.BMC)
	assert.NotEmpty(t, after, "a request made after the BMC was replaced (and the old request withdrawn) never reached the new BMC; "+
		"events %q", drainEvents(rec))
}
