package kube

// The scenes of the review 39 tests (review_39*_test.go,
// bmcpin_withdrawn_test.go) written once: a host on two Redfish BMCs under
// a reboot controller wired as the binary wires it, a reboot controller
// over fake power, a remediation's request made and made again, and the
// watches of the record that the tests' verdicts rest on.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
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
	"github.com/rebootkit/rebootkit/remediation"
)

// pinWorld39 is host h1 in a fresh namespace with its BMC credentials
// (h1-bmc: admin, pw-1) and two Redfish BMCs that accept them: BMC 1 (hw1
// behind bmc1, served by srv1), in spec.bmc, and BMC 2 (hw2 behind bmc2,
// srv2), for a reboot client's endpoint or the replacement of BMC 1. With
// a controller (start): a manager on the namespace, Powers with no
// admission policy, the reboot controller (recorder rec).
type pinWorld39 struct {
	direct     client.Client
	ns         string
	hw1, hw2   *fake.Power
	bmc1, bmc2 *redfishtest.BMC
	srv1, srv2 *httptest.Server
	powers     *Powers
	async      *Async
	rec        *events.FakeRecorder
}

// pinOpts39 is how a pinWorld39 differs from the plain one.
type pinOpts39 struct {
	// hw1, hw2: the BMCs' hardware (nil: a fake.Power with no faults;
	// the same one twice: two BMCs of one machine).
	hw1, hw2 *fake.Power
	// wrap1 is srv1's handler made of BMC 1's (nil: BMC 1's).
	wrap1 func(http.Handler) http.Handler
	// host changes h1 in the write that puts BMC 1 in spec.bmc.
	host func(*metal3.BareMetalHost)
	// stale is the Reconciler's StaleReads and RetryDelay; with
	// powersStale, the Powers' StaleReads too.
	stale       time.Duration
	powersStale bool
	// call and connect are the pool's timeouts (0: 2 s).
	call, connect time.Duration
	// async runs the power calls through Async (Timeout a minute), as
	// the binary does.
	async bool
}

// newPinWorld39 sets the scene with no controller; the servers close at
// the test's end.
func newPinWorld39(t *testing.T, ctx context.Context, o pinOpts39) *pinWorld39 {
	t.Helper()
	w := &pinWorld39{direct: adminClient(t), hw1: o.hw1, hw2: o.hw2}
	w.ns = newNamespace(t, w.direct)
	if w.hw1 == nil {
		w.hw1 = fake.NewPower(time.Now, fake.PowerConfig{})
	}
	if w.hw2 == nil {
		w.hw2 = fake.NewPower(time.Now, fake.PowerConfig{})
	}
	w.bmc1 = redfishtest.NewBMC(time.Now, w.hw1, "admin", "pw-1")
	var h1 http.Handler = w.bmc1
	if o.wrap1 != nil {
		h1 = o.wrap1(w.bmc1)
	}
	w.srv1 = httptest.NewServer(h1)
	t.Cleanup(w.srv1.Close)
	w.bmc2 = redfishtest.NewBMC(time.Now, w.hw2, "admin", "pw-1")
	w.srv2 = httptest.NewServer(w.bmc2)
	t.Cleanup(w.srv2.Close)
	newBMH(t, w.direct, w.ns, "h1")
	require.NoError(t, w.direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(w.srv1)
		if o.host != nil {
			o.host(h)
		}
	}))
	return w
}

// startPinWorld39 sets the scene and runs its reboot controller until the
// test's end.
func startPinWorld39(t *testing.T, ctx context.Context, o pinOpts39) *pinWorld39 {
	t.Helper()
	w := newPinWorld39(t, ctx, o)
	call, connect := o.call, o.connect
	if call == 0 {
		call = 2 * time.Second
	}
	if connect == 0 {
		connect = 2 * time.Second
	}
	mgr := namespacedManager(t, w.ns)
	w.powers = &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: w.ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + w.ns, PolicySettle: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: call, ConnectTimeout: connect})}
	if o.powersStale {
		w.powers.StaleReads = o.stale
	}
	t.Cleanup(func() { _ = w.powers.Close() })
	powerOf := w.powers.Controller
	if o.async {
		w.async = &Async{Power: w.powers.Controller, Timeout: time.Minute}
		w.powers.Done = func(name string) {
			if w.async.Done != nil {
				w.async.Done(name)
			}
		}
		powerOf = w.async.Controller
	}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: w.ns}, Now: time.Now, Power: powerOf,
		Config: reboot.Config{StaleReads: o.stale, RetryDelay: o.stale, SoftTimeout: time.Second}}
	w.rec = events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + w.ns, Reconciler: rr, Namespace: w.ns, Recorder: w.rec, Async: w.async,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// busyOff39 is a fault of a BMC that answers every power-off "busy".
func busyOff39(c fake.Call) fake.Fault {
	if c.Op == fake.OpOff {
		return fake.Fault{Kind: fake.FaultBusy}
	}
	return fake.Fault{}
}

// key39 is h1's name in ns.
func key39(ns string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "h1"} }

// remediationKey39 is the annotation of a remediation's reboot request.
const remediationKey39 = reboot.AnnotationPrefix + remediation.RebootKey

// remediationAsks puts a remediation's request (made at t1, now, for the
// Machine of h1) on h1 and waits for the record to pin BMC 1 for it; it
// returns h1 as read before, and t1.
func (w *pinWorld39) remediationAsks(t *testing.T, ctx context.Context) (metal3.BareMetalHost, time.Time) {
	t.Helper()
	var bmh metal3.BareMetalHost
	require.NoError(t, w.direct.Get(ctx, key39(w.ns), &bmh))
	t1 := time.Now()
	v1 := remediation.RebootValue(string(bmh.UID)+"-machine", t1)
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, remediationKey39, v1) }))
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return w.direct.Get(ctx, key39(w.ns), &record) == nil && record.Spec.BMC != nil &&
			record.Spec.BMC.Address == redfishAt(w.srv1)
	}, 10*time.Second, 20*time.Millisecond, "premise: the remediation's request pins the real BMC")
	return bmh, t1
}

// remediationAsksAgain puts the remediation's request for the same
// attempt again, made at now, on host bmh and returns its ticket.
func (w *pinWorld39) remediationAsksAgain(t *testing.T, ctx context.Context, bmh metal3.BareMetalHost) reboot.Ticket {
	t.Helper()
	t2 := time.Now()
	v2 := remediation.RebootValue(string(bmh.UID)+"-machine", t2)
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, remediationKey39, v2) }))
	return reboot.Ticket{Host: "h1", Annotation: remediationKey39, Value: v2, At: t2}
}

// offTried waits for a power-off to reach BMC 1.
func (w *pinWorld39) offTried(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range w.hw1.Calls() {
			if c.Op == fake.OpOff {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "premise: the power-off was tried on the real BMC")
}

// watchFakeFence reads h1's record directly every 50 ms for 8 s and calls
// fenced with it whenever its status is fencing evidence for tk
// (FencedFor) while hw1 runs (ground truth): fencing evidence that did
// not come from the host's hardware.
func (w *pinWorld39) watchFakeFence(ctx context.Context, tk reboot.Ticket, fenced func(r v1alpha1.RebootRecord)) {
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var r v1alpha1.RebootRecord
		if w.direct.Get(ctx, key39(w.ns), &r) != nil || r.Spec.Status == "" {
			continue
		}
		var st reboot.Status
		if json.Unmarshal([]byte(r.Spec.Status), &st) == nil && reboot.FencedFor(st, tk, time.Now()) && w.hw1.WasOnAt(time.Now()) {
			fenced(r)
		}
	}
}

// fakePowerEnv39 runs a reboot controller named name for namespace ns
// whose Reconciler's Power is hw itself (no emulator), its leadership
// fenced by guard (nil: none), its recorder buffering size events, until
// ctx ends, stop is called or the test ends.
func fakePowerEnv39(t *testing.T, ctx context.Context, name, ns string, hw *fake.Power, guard reboot.Guard, cfg reboot.Config, size int) (*events.FakeRecorder, func()) {
	t.Helper()
	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power: func(string) (power.Controller, error) { return hw, nil }, Guard: guard,
		Config: cfg}
	rec := events.NewFakeRecorder(size)
	require.NoError(t, (&RebootController{Name: name, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return rec, stop
}

// fakeHost39 is host h1 in a fresh namespace, with host (nil: none)
// applied to it, and fake hardware of cfg for a controller of
// fakePowerEnv39 or review39Env: the admin client, the namespace, the
// hardware.
func fakeHost39(t *testing.T, ctx context.Context, cfg fake.PowerConfig, host func(*metal3.BareMetalHost)) (client.Client, string, *fake.Power) {
	t.Helper()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, cfg)
	newBMH(t, direct, ns, "h1")
	if host != nil {
		require.NoError(t, change(ctx, direct, ns, "h1", host))
	}
	return direct, ns, hw
}

// resetOnly39 makes a host reset-only (spec.disablePowerOff).
func resetOnly39(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }

// requestLog39 logs the requests a BMC got, each with its time since the
// log began.
type requestLog39 struct {
	t0   time.Time
	mu   sync.Mutex
	reqs []string
}

func newRequestLog39() *requestLog39 { return &requestLog39{t0: time.Now()} }

// log adds s.
func (l *requestLog39) log(s string) {
	l.mu.Lock()
	l.reqs = append(l.reqs, time.Since(l.t0).Round(time.Millisecond).String()+" "+s)
	l.mu.Unlock()
}

// got is what was logged so far.
func (l *requestLog39) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// onsAfter39 is when hw's hardware was powered on after at.
func onsAfter39(hw *fake.Power, at time.Time) []time.Time {
	var on []time.Time
	for _, tr := range hw.Transitions() {
		if tr.To == power.StateOn && tr.At.After(at) {
			on = append(on, tr.At)
		}
	}
	return on
}

// firstFenced39 reads h1 and its record in ns directly every 20 ms until
// deadline and returns the first instant the record reported a keyed
// request made at since fenced (zero: never).
func firstFenced39(ctx context.Context, c client.Client, ns string, since, deadline time.Time) time.Time {
	var fencedAt time.Time
	for time.Now().Before(deadline) {
		var rec v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if fencedAt.IsZero() && c.Get(ctx, key39(ns), &h) == nil && c.Get(ctx, key39(ns), &rec) == nil {
			if st, ok := recordStatus(&rec, &h, true); ok && st.Fenced(since, time.Now()) {
				fencedAt = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fencedAt
}

// offlineWhileOwed39 writes spec.online false on h1 of s, waits delay and
// 2 s more, and checks the premise that the host was still off at the
// write (ground truth); it returns the write's instant and the requests
// reqs logged by then.
func offlineWhileOwed39(t *testing.T, ctx context.Context, s *owed39m, reqs *requestLog39, delay time.Duration) (time.Time, []string) {
	t.Helper()
	wrote := time.Now()
	require.NoError(t, change(ctx, s.direct, s.ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.Online = false }))
	time.Sleep(delay + 2*time.Second)
	got := reqs.got()
	require.False(t, s.hw1.WasOnAt(wrote), "premise: the host is still off when spec.online is set false (transitions %+v; requests %q)",
		s.hw1.Transitions(), got)
	return wrote, got
}
