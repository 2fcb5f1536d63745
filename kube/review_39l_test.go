package kube

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// slowOn39l wraps a Redfish BMC so that, while armed, a reset request
// whose ResetType is "On" reaches the BMC only delay after it arrived (a
// BMC slow to take a command, or a network queue): the command lands
// late, as a real one does.
func slowOn39l(h http.Handler, armed *atomic.Bool, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && armed.Load() {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) {
				time.Sleep(delay)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// owedSetup39l is withdrawnOffSetup39k with h1's first BMC slow to take
// an On (delay39l) once the hold is withdrawn: a keyed hold powers h1 off
// through its first BMC and pins it, then one write withdraws the hold
// and puts a second BMC in spec.bmc, and the pinned BMC reads Off. It
// returns when the record owes the power-on (PowerOnThrough), with the
// attempt's On on its way to the first BMC.
func owedSetup39l(t *testing.T, ctx context.Context) (client.Client, string, *fake.Power, *httptest.Server, *events.FakeRecorder, func(*metal3.BareMetalHost)) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	var armed atomic.Bool
	srv1 := httptest.NewServer(slowOn39l(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"), &armed, delay39l))
	t.Cleanup(srv1.Close)
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	t.Cleanup(srv2.Close)
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	const stale = 500 * time.Millisecond
	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 10 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = powers.Close() })

	// A keyed hold powers h1 off through its BMC and pins it.
	hold := func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
	}
	require.NoError(t, change(ctx, direct, ns, "h1", hold))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 20*time.Millisecond, "premise: held off")
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC != nil
	}, 5*time.Second, 20*time.Millisecond, "premise: the hold pins the BMC")

	// The hold is withdrawn in the write that changes the BMC: the pinned
	// BMC reads Off, and a power-on is owed through it (its On is slow
	// to reach the BMC).
	armed.Store(true)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	hw2.OutOfBandOff()
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.PowerOnThrough != nil
	}, 10*time.Second, 10*time.Millisecond, "premise: the power-on is owed; events %q", drainEvents(rec))
	return direct, ns, hw1, srv1, rec, hold
}

// delay39l is how late the first BMC takes an On once armed.
const delay39l = 2500 * time.Millisecond

// TestReview39l_OwedPowerOnLandsAfterRestoreAndHold: the power-on owed
// through a pinned BMC runs in a goroutine of its own (runPinnedOn), and
// when the mark is resolved (spec.bmc restored, or the new BMC accepted)
// checkPin only forgets it ("a running one goes on to its end, unkept")
// and lets the reboot package act on the host in the same pass. So two
// actors drive one BMC: the administrator restores spec.bmc and a fencer
// holds the host off with a keyed request; the reboot controller takes
// the hold (the host reads Off, held), and then the owed power-on's On,
// still on its way to the BMC, lands: the held host runs. Ground truth:
// the pinned BMC's hardware must stay off from the restore on while the
// keyed request holds it. Correct: resolving the mark waits for (or
// fences) the running attempt before the reboot package may act, or the
// attempt's On is made conditional on the intent still being owed.
func TestReview39l_OwedPowerOnLandsAfterRestoreAndHold(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw1, srv1, rec, hold := owedSetup39l(t, ctx)

	// The administrator restores spec.bmc, and the fencer holds the host
	// off again, in one write.
	restored := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv1)
		hold(h)
	}))
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil &&
			record.Spec.BMCChanged == nil && record.Spec.PowerOnThrough == nil
	}, 5*time.Second, 10*time.Millisecond, "premise: the mark is resolved by the restore; events %q", drainEvents(rec))
	time.Sleep(delay39l + 2*time.Second)
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fencer", "premise: the keyed hold is still there")
	assert.True(t, hw1.OffThroughout(restored, time.Now()),
		"a host held off by a keyed request is never powered on (transitions %+v; calls %+v; events %q)",
		hw1.Transitions(), hw1.Calls(), drainEvents(rec))
}

// TestReview39l_OwedPowerOnIgnoresOnlineFalseSetDuringAttempt: onEligible
// is checked when an attempt starts, never when its On is sent: an
// administrator who takes the host out of service (spec.online false)
// while the attempt is on its way has it powered on anyway, and, the
// record still marked BMCChanged, nothing powers it off again: it runs
// with spec.online false until the new BMC is accepted. The doc (kube
// doc.go, README) says the owed power-on is "never made while
// spec.online is false". Ground truth: the pinned BMC's hardware, which
// must stay off from the write on.
func TestReview39l_OwedPowerOnIgnoresOnlineFalseSetDuringAttempt(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw1, _, rec, _ := owedSetup39l(t, ctx)
	wrote := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.Online = false }))
	time.Sleep(delay39l + 2*time.Second)
	assert.True(t, hw1.OffThroughout(wrote, time.Now()),
		"spec.online is false: the owed power-on is not made (transitions %+v; calls %+v; events %q)",
		hw1.Transitions(), hw1.Calls(), drainEvents(rec))
}
