package kube

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// owed39m is owedSetup39l's scene with the controller's lifetime in the
// test's hands: stop ends the controller as a crash does (its manager
// ends; its BMC sessions are not logged out), start runs a fresh one (a restart, or
// the next leader) on the same namespace, with nothing in memory.
type owed39m struct {
	direct client.Client
	ns     string
	hw1    *fake.Power
	srv1   *httptest.Server
	rec    *events.FakeRecorder
	stop   func()
	start  func()
}

const stale39m = 500 * time.Millisecond

// setup39m: a keyed hold powers h1 off through its first BMC (wrapped by
// wrap, armed by armed) and pins it; then one write withdraws the hold and
// puts a second BMC in spec.bmc, and the pinned BMC reads Off: it returns
// when the record owes the power-on through the first BMC
// (PowerOnThrough), the armed flag set as soon as it does (the attempt
// is then in its StaleReads settle).
func setup39m(t *testing.T, ctx context.Context, wrap func(http.Handler, *atomic.Bool) http.Handler) *owed39m {
	t.Helper()
	var armed atomic.Bool
	w := newPinWorld39(t, ctx, pinOpts39{wrap1: func(h http.Handler) http.Handler { return wrap(h, &armed) }})
	direct, ns, hw1, hw2, srv1, srv2 := w.direct, w.ns, w.hw1, w.hw2, w.srv1, w.srv2
	rc := asController(t, ns)
	rec := events.NewFakeRecorder(1000)
	s := &owed39m{direct: direct, ns: ns, hw1: hw1, srv1: srv1, rec: rec}
	var mu sync.Mutex
	var stops []func()
	gen := 0
	s.start = func() {
		mu.Lock()
		defer mu.Unlock()
		gen++
		cctx, cancel := context.WithCancel(ctx)
		mgr := managerAs(t, rc, ns)
		powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 10 * time.Second,
			PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale39m,
			Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
		rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
			Config: reboot.Config{StaleReads: stale39m, RetryDelay: stale39m, SoftTimeout: time.Second}}
		require.NoError(t, (&RebootController{Name: "reboot-" + ns + "-" + string(rune('a'+gen)), Reconciler: rr, Namespace: ns, Recorder: rec,
			IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = mgr.Start(cctx) }()
		// stop is a crash (kill -9, a node lost) as far as the BMC
		// goes: the manager ends, and the process's sessions are not
		// logged out (a killed process logs nothing out), so a command
		// the BMC already took is carried out; the Powers is closed at
		// the test's end only.
		s.stop = func() { cancel(); wg.Wait() }
		stops = append(stops, func() { cancel(); wg.Wait(); _ = powers.Close() })
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range stops {
			f()
		}
	})
	s.start()

	hold := func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
	}
	require.NoError(t, change(ctx, direct, ns, "h1", hold))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 20*time.Millisecond, "premise: held off")
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC != nil
	}, 5*time.Second, 20*time.Millisecond, "premise: the hold pins the BMC")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	hw2.OutOfBandOff()
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.PowerOnThrough != nil
	}, 10*time.Second, 5*time.Millisecond, "premise: the power-on is owed; events %q", drainEvents(rec))
	armed.Store(true)
	return s
}

// hold39m is the fencer's keyed hard hold.
func hold39m(h *metal3.BareMetalHost) {
	metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
}

// TestReview39m_RestartForgetsOwedOnInFlight: the round-11 fix makes the
// reboot package wait (resolvedHold, ErrInFlight: "takes no evidence from
// the host and sends it nothing while that On may land") for an owed
// pinned power-on whose On may still land once the mark is resolved, but
// that wait is a field of the Powers in memory: a controller that
// restarts (or a new leader taking over from one that crashed) while the
// On is on its way to a slow BMC has no pinOn entry, and the record, the
// only state a new leader has, keeps no trace of the attempt
// (PowerOnThrough is removed by the restore). So when spec.bmc is
// restored with a keyed hold, the new controller takes evidence at once:
// the host reads Off, the request is reported fenced (LastPoweredOff),
// and then the old process's On lands: the host a keyed request holds,
// reported fenced, runs again (HoldBroken, by rebootkit's own command).
// Without the restart the same scene passes: the hold waits for the On
// to land, powers the host off, and only then reports it fenced. Ground
// truth: the pinned BMC's hardware must stay off from the first instant
// the record reports the keyed request fenced. (CONTROL39M=1 runs the
// scene without the restart: it passes.)
func TestReview39m_RestartForgetsOwedOnInFlight(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler { return slowOn39l(h, armed, delay39l) })
	// The attempt's settle (StaleReads) is over and its On is on its way
	// to the slow BMC when the controller dies; a new one starts.
	time.Sleep(stale39m + 300*time.Millisecond)
	if os.Getenv("CONTROL39M") == "" {
		s.stop()
		s.start()
	}
	restored := time.Now()
	require.NoError(t, change(ctx, s.direct, s.ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(s.srv1)
		hold39m(h)
	}))
	// Watch the record, uncached: the first instant it reports the keyed
	// request fenced.
	fencedAt := firstFenced39(ctx, s.direct, s.ns, restored, time.Now().Add(delay39l+4*time.Second))
	require.False(t, fencedAt.IsZero(), "premise: the keyed request is reported fenced; events %q", drainEvents(s.rec))
	var h metal3.BareMetalHost
	require.NoError(t, s.direct.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: "h1"}, &h))
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fencer", "premise: the keyed hold is still there")
	assert.True(t, s.hw1.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced for a keyed request (at %v, %v after the restore) stays off while it is held, across a restart of the "+
			"controller (transitions %+v; calls %+v; events %q)",
		fencedAt, fencedAt.Sub(restored), s.hw1.Transitions(), s.hw1.Calls(), drainEvents(s.rec))
}

// slowReads39m wraps a Redfish BMC so that, while armed, every request
// but a reset (a state read, a login, the service root) is answered only
// delay after it arrived, and logs each request's arrival: a BMC slow to
// answer reads (seconds, as many are under load), whose reset is taken
// at once.
func slowReads39m(h http.Handler, armed *atomic.Bool, delay time.Duration, log func(string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		log(r.Method + " " + r.URL.Path + " " + string(body))
		if armed.Load() && !bytes.Contains(body, []byte(`"ResetType"`)) {
			time.Sleep(delay)
		}
		h.ServeHTTP(w, r)
	})
}

// TestReview39m_OnlineFalseDuringPinnedOnStateReadIgnored: stillOwed
// reads the host and record "just before o's On is sent", but it runs
// before pc.On, and pc.On is not one request: the redfish controller
// first reads the system's power state (change: readState, "anything
// else needs a read"), and the pool may log in first; each of those may
// take up to CallTimeout. Every request of it lies between the check and
// the On, so the window in which a write is "not seen" (doc.go) lasts as
// long as the BMC is slow to answer a read, not an instant. An
// administrator who sets spec.online false while the pinned BMC is slow
// to answer has the host powered on anyway, by an On sent (to a BMC
// that takes it at once) seconds after the write landed; and, the record
// still marked BMCChanged, nothing powers the host off again. The doc
// says the owed power-on is never made while spec.online is false.
// Ground truth: the pinned BMC's hardware, which must stay off from the
// write on, and the BMC's own request log (the On arrives after the
// write). Correct: make the check after the BMC's last answer before the
// On (read State, check, then send the On with no further read), or
// re-check after the On and power the host off again through the pinned
// BMC if it was no longer owed.
func TestReview39m_OnlineFalseDuringPinnedOnStateReadIgnored(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const delay = 2 * time.Second
	reqs := newRequestLog39()
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler { return slowReads39m(h, armed, delay, reqs.log) })
	// The attempt's settle is over: stillOwed has read the host (online,
	// owed), and the attempt's On is reading the slow pinned BMC.
	time.Sleep(stale39m + 500*time.Millisecond)
	wrote, got := offlineWhileOwed39(t, ctx, s, reqs, delay)
	assert.Empty(t, onsAfter39(s.hw1, wrote),
		"spec.online is false (written %v after the start, the host off): the owed power-on is not sent after that write landed (transitions %+v; calls %+v; requests %q; events %q)",
		wrote.Sub(reqs.t0), s.hw1.Transitions(), s.hw1.Calls(), got, drainEvents(s.rec))
}
