package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// review39bEnv is review39Env with a controller name of its own and a stop
// function (a restart is a stop and a second env).
func review39bEnv(t *testing.T, name, ns string, hw *fake.Power, cfg reboot.Config) (*events.FakeRecorder, func()) {
	t.Helper()
	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: cfg}
	rec := events.NewFakeRecorder(10000)
	require.NoError(t, (&RebootController{Name: name, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return rec, stop
}

func drainEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hostAnnotations(t *testing.T, ctx context.Context, c client.Client, ns string) map[string]string {
	t.Helper()
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	return h.Annotations
}

// TestReview39b_RefusedResetsGiveUpUnreset: a reset the BMC refuses (it
// answers at once with an error and carries nothing out; a Redfish 409/503
// while the BMC is busy) is counted like a reset whose answer was lost
// (kube/resetdecide.go decideReset: "Refused, failed or timed out: it may
// have been carried out all the same"; resend counts it in Resets). Two
// transient refusals exhaust maxResets: the controller gives up with
// ResetOutcomeUnknown, whose text says "the BMC's answer to the last one
// never came: it may have been reset" (both false), and never resets the
// host, although the BMC would accept the next reset. The request hangs
// for good. Ground truth: fake power's Resets() stays empty.
func TestReview39b_RefusedResetsGiveUpUnreset(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	hw.FailNext(fake.OpReset, fake.Fault{Kind: fake.FaultFailed}) // refused, not carried out
	hw.FailNext(fake.OpReset, fake.Fault{Kind: fake.FaultBusy})   // busy, not carried out
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	const stale = 300 * time.Millisecond
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	start := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	time.Sleep(15 * stale)
	evs := drainEvents(rec)
	assert.False(t, hw.WasOffDuring(start, time.Now()), "never off")
	resets := 0
	for _, c := range hw.Calls() {
		if c.Op == fake.OpReset {
			resets++
		}
	}
	_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
	assert.NotEmpty(t, hw.Resets(), "the BMC refused two resets (nothing was carried out) and would accept the next: the host was never "+
		"reset (reset calls %d), the request is still pending=%v, events %q", resets, pending, evs)
	for _, e := range evs {
		assert.NotContains(t, e, "ResetOutcomeUnknown", "the BMC answered every reset (a refusal): its answer did not get lost")
	}
}

// TestReview39b_ReRequestAcrossRestartAnsweredByOldReset: the reset
// state is tied to a request by ResetRequestAnnotation, which only the
// controller removes, and only when it sees the request gone
// (kube/reset.go reconcileReset: marker check; case d.Clear). A request
// removed and made again while the controller is down (a restart, a
// leader change) leaves the marker in place, so the new request carries
// the old request's Since and is answered by the old request's reset: the
// controller reports "was reset at <old time>" and removes the request
// with no reset after it. doc.go (ResetRequestAnnotation): "a record
// whose Since the host does not carry is an earlier request's and never
// answers this one"; the event text of ResetOutcomeUnknown: "remove the
// request (a new request starts afresh)". Ground truth: Resets().
func TestReview39b_ReRequestAcrossRestartAnsweredByOldReset(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	// StaleReads long enough that the first request is still pending
	// (reset accepted, waiting for an On reading StaleReads after it)
	// when the controller stops.
	const stale = 3 * time.Second
	cfg := reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}
	_, stop := review39bEnv(t, "reboot-"+ns, ns, hw, cfg)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { return len(hw.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "first request's reset")
	time.Sleep(300 * time.Millisecond) // its acceptance persisted
	stop()

	// While the controller is down: the request is withdrawn, and later made again.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { delete(h.Annotations, reboot.Annotation) }))
	time.Sleep(stale) // the old reset is long over
	second := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "again")
	}))

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
	time.Sleep(200 * time.Millisecond) // the event follows the write
	evs := drainEvents(rec)
	var done []string
	for _, e := range evs {
		if strings.Contains(e, "Normal Reset") {
			done = append(done, e)
		}
	}
	if !pending {
		assert.NotEmpty(t, after, "the second request was removed as done (%q; all events %q) with no reset after it was made (resets %v, second request at %v)",
			done, evs, hw.Resets(), second)
	}
	assert.False(t, hw.WasOffDuring(second, time.Now()), "never off")
}
