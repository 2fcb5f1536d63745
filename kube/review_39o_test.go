package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// taskOn39o wraps a Redfish BMC so that, while armed, the first reset
// POST with ResetType On is answered at once 202 Accepted with a task
// monitor, and carried out by the hardware (land) only delay later; the
// task monitor is served truthfully (TaskState Running until the
// power-on landed, then Completed), so a client that follows it knows
// when the On may no longer land. answered gets the instant of the 202.
func taskOn39o(h http.Handler, armed *atomic.Bool, delay time.Duration, land func(), answered chan<- time.Time) http.Handler {
	const monitor = "/redfish/v1/TaskService/Tasks/39o"
	var once, landed atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") == monitor {
			state, code := "Running", http.StatusAccepted
			if landed.Load() {
				state, code = "Completed", http.StatusOK
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":"39o","TaskState":%q,"TaskStatus":"OK"}`, monitor, state)
			return
		}
		if armed.Load() && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) && once.CompareAndSwap(false, true) {
				w.Header().Set("Location", monitor)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":"39o","TaskState":"Running"}`, monitor)
				answered <- time.Now()
				time.AfterFunc(delay, func() { land(); landed.Store(true) })
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestReview39_QueuedOnLandsAfterDeadlineUnfencesHost: the round-13 fix
// (power.Queued) makes the owed pinned power-on that the BMC answered
// 202 Accepted wait, in memory (settledAt) and in the record (no
// Returned), until the call's deadline (Until) plus StaleReads, and
// kube/doc.go says "The wait assumes that a BMC carries the On out, if
// ever, before the call's deadline". A 202 is the BMC saying the
// opposite: it took the On as a task that it carries out later, on its
// own time line, not bound by the HTTP call's deadline (power.Queued's
// own doc: "it may take effect up to the call's deadline or later"), and
// it hands the client a task monitor that says when it is done. Here the
// task runs 13 s (the pool's CallTimeout is 5 s, StaleReads 0.5 s), its
// monitor truthfully Running until then. spec.bmc is restored with a
// keyed hard hold right after the 202: the controller waits to Until +
// StaleReads, reads the host Off (the task has not run), reports the
// keyed request fenced (LastPoweredOff), and then rebootkit's own
// queued power-on runs the host it reported fenced. Ground truth: the
// pinned BMC's hardware must stay off from the first instant the record
// reports the keyed request fenced (a correct controller may also not
// report it fenced within the scene). Today it is reported fenced about
// 10.3 s after the 202 (LastPoweredOff), and the task's On lands at 13 s;
// on a machine so loaded that the report comes after the landing the
// test passes (the hold powers the host off again first): it cannot
// fail wrongly. Correct: an On answered 202 is in
// flight until its task monitor says it ended (Completed, Exception,
// Killed...) or the host reads On, bounded by a documented task limit
// after which the host is left as it is (ErrInFlight, an event that
// says the fix), not until the HTTP call's deadline; the record keeps
// it (the monitor's URI) so that a restarted controller or a new leader
// waits as well.
func TestReview39_QueuedOnLandsAfterDeadlineUnfencesHost(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const landDelay = 13 * time.Second
	var hwp atomic.Pointer[fake.Power]
	ready := make(chan struct{})
	answered := make(chan time.Time, 1)
	var landed atomic.Bool
	land := func() {
		<-ready
		_ = hwp.Load().On(context.Background())
		landed.Store(true)
	}
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler {
		return taskOn39o(h, armed, landDelay, land, answered)
	})
	hwp.Store(s.hw1)
	close(ready)
	var at time.Time
	select {
	case at = <-answered:
	case <-time.After(8 * time.Second):
		t.Fatalf("premise: the owed On is sent and answered 202 (events %q)", drainEvents(s.rec))
	}
	key := types.NamespacedName{Namespace: s.ns, Name: "h1"}
	var rec v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return s.direct.Get(ctx, key, &rec) == nil && rec.Spec.PowerOnSent != nil
	}, 3*time.Second, 5*time.Millisecond, "premise: the sending controller records the On as sent")
	restored := time.Now()
	require.NoError(t, change(ctx, s.direct, s.ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(s.srv1)
		hold39m(h)
	}))
	require.False(t, landed.Load(), "premise: the queued On has not landed when spec.bmc is restored")
	var fencedAt time.Time
	deadline := at.Add(landDelay + time.Second)
	for time.Now().Before(deadline) {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if fencedAt.IsZero() && s.direct.Get(ctx, key, &h) == nil && s.direct.Get(ctx, key, &r) == nil {
			if st, ok := recordStatus(&r, &h, true); ok && st.Fenced(restored, time.Now()) {
				fencedAt = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, landed.Load(), "premise: the queued On landed")
	require.NoError(t, s.direct.Get(ctx, key, &rec))
	if fencedAt.IsZero() {
		return // the wait held: correct
	}
	assert.True(t, s.hw1.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced for a keyed request (at %v after the 202, %v after the restore; PowerOnSent until %s) stays off "+
			"while it is held: a power-on the BMC accepted as a task (202, monitor Running) may land after the call's deadline "+
			"(transitions %+v; calls %+v; events %q)",
		fencedAt.Sub(at), fencedAt.Sub(restored), untilOf39o(&rec), s.hw1.Transitions(), s.hw1.Calls(), drainEvents(s.rec))
}

// untilOf39o is the record's PowerOnSent.Until, if any.
func untilOf39o(rec *v1alpha1.RebootRecord) string {
	if rec.Spec.PowerOnSent == nil {
		return "(none)"
	}
	return rec.Spec.PowerOnSent.Until
}

// TestReview39_QueuedOnOfNormalPathTakenAsLanded: the round-13 fix
// (power.Queued) is consulted by the owed pinned power-on only
// (runPinnedOn). The normal path's power-on, the one every withdrawn
// hold and every reboot ends with, goes through the same adapter
// (Powers.Controller, Async, the pool) with no Queued attached: a 202
// Accepted is a nil error, Async records the call as answered (callEnd
// lost only on an error), and the reboot package takes the On as
// carried out by the call's return, its evidence rule waiting StaleReads
// from there. Here the BMC queues the On as a task and carries it out 4 s
// later, within the call's deadline (the pool's CallTimeout, 5 s: inside
// what kube/doc.go and LeaseGuard assume a BMC does), its task monitor
// truthfully Running until then. A keyed hard hold powers the host off
// and is withdrawn; the controller powers the host on (202); a fencer
// asks for the keyed hold again right after the 202. The controller
// reads the host Off (the task has not run), reports the new keyed
// request fenced (LastPoweredOff), and then rebootkit's own queued On
// runs the host it reported fenced. Ground truth: the BMC's hardware must
// stay off from the first instant the record reports the request
// fenced. Correct: a power-on answered 202 counts as in flight (Async's
// lost-answer rule, LateAnswer: the reboot package's LostLanding) until
// its task monitor says it ended or the host reads On, as the pinned
// path's does at least to the call's deadline.
func TestReview39_QueuedOnOfNormalPathTakenAsLanded(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const landDelay = 4 * time.Second
	const stale = 500 * time.Millisecond
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	var armed atomic.Bool
	var landed atomic.Bool
	answered := make(chan time.Time, 1)
	srv := httptest.NewServer(taskOn39o(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"), &armed, landDelay,
		func() { _ = hw.On(context.Background()); landed.Store(true) }, answered))
	defer srv.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv) }))
	mgr := managerAs(t, asController(t, ns), ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 10 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	defer powers.Close()
	async := &Async{Power: powers.Controller, Timeout: time.Minute}
	powers.Done = func(name string) {
		if async.Done != nil {
			async.Done(name)
		}
	}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: async.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec, Async: async,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	key := types.NamespacedName{Namespace: ns, Name: "h1"}
	require.NoError(t, change(ctx, direct, ns, "h1", hold39m))
	require.Eventually(t, func() bool {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if direct.Get(ctx, key, &h) != nil || direct.Get(ctx, key, &r) != nil {
			return false
		}
		st, ok := recordStatus(&r, &h, true)
		return ok && !st.LastPoweredOff.IsZero() && !hw.WasOnAt(time.Now())
	}, 15*time.Second, 20*time.Millisecond, "premise: the keyed hold powers the host off and reports it; events %q", drainEvents(rec))
	armed.Store(true)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	var at time.Time
	select {
	case at = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatalf("premise: the withdrawn hold ends with a power-on, answered 202 (calls %+v; events %q)", hw.Calls(), drainEvents(rec))
	}
	asked := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", hold39m))
	var fencedAt time.Time
	for deadline := at.Add(landDelay + time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if fencedAt.IsZero() && direct.Get(ctx, key, &h) == nil && direct.Get(ctx, key, &r) == nil {
			if st, ok := recordStatus(&r, &h, true); ok && st.Fenced(asked, time.Now()) {
				fencedAt = time.Now()
			}
		}
	}
	require.True(t, landed.Load(), "premise: the queued On landed")
	if fencedAt.IsZero() {
		return // not reported fenced before the On landed: correct
	}
	assert.True(t, hw.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced for a keyed request (at %v after the 202, %v after the request) stays off while it is held: "+
			"a power-on the BMC accepted as a task (202, monitor Running) lands after the call returned (transitions %+v; calls %+v; events %q)",
		fencedAt.Sub(at), fencedAt.Sub(asked), hw.Transitions(), hw.Calls(), drainEvents(rec))
}
