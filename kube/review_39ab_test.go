package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// queuedTask39ab is the task monitor of the power-on the earlier leader
// sent through the pinned BMC, which that BMC accepted for later (202)
// and still runs: its monitor answers 202 Running (ground truth: the
// BMC's own answer), so the power-on may still land.
const queuedTask39ab = "/redfish/v1/TaskService/Tasks/7"

// pinnedWorld39ab is host h1 whose pending reboot's BMC (the pin, A, a
// Redfish emulator) was rewritten by a reboot client (spec.bmc names C),
// whose record owes a power-on through A (BMCChanged and PowerOnThrough
// name A) and shows the booking the earlier leader wrote for it (markSent,
// then markTask): sent a second ago through A, accepted as the task
// queuedTask39ab, waited for until TaskLimit from now, no Returned. The
// earlier leader is gone (its process ended with its lease); p is the
// new leader's Powers.
type pinnedWorld39ab struct {
	p        *Powers
	c        client.Client
	b        *redfishtest.BMC
	hw       *fake.Power
	pinA     v1alpha1.BMCPin
	taskGets *atomic.Int32
}

func newPinnedWorld39ab(t *testing.T) *pinnedWorld39ab {
	t.Helper()
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	w := &pinnedWorld39ab{b: b, hw: hw, taskGets: new(atomic.Int32)}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") == queuedTask39ab {
			w.taskGets.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusAccepted)
			_, _ = rw.Write([]byte(`{"TaskState":"Running"}`))
			return
		}
		b.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	now := time.Now()
	w.pinA = v1alpha1.BMCPin{Address: redfishAt(srv), CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-time.Hour))}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}
	pin := w.pinA
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", BMCChanged: &pin, PowerOnThrough: &pin,
			PowerOnSent: &v1alpha1.PowerOnSent{Address: pin.Address, At: stamp(now.Add(-time.Second)),
				Until: stamp(now.Add(DefaultTaskLimit)), Task: queuedTask39ab}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	w.c = crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	w.p = &Powers{WithoutAdmissionPolicy: true, Client: w.c, Secrets: w.c, Namespace: "ns", StaleReads: 200 * time.Millisecond,
		Timeout: 5 * time.Second, Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = w.p.Close() })
	return w
}

func (w *pinnedWorld39ab) record(t *testing.T) v1alpha1.RebootRecord {
	t.Helper()
	var rec v1alpha1.RebootRecord
	require.NoError(t, w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
	return rec
}

// TestReview39ab_PinnedOnReplacesLiveBookingHostHandedOverWhileTaskRuns
// (review 39 round 17, leaders handing over with a booking): the
// earlier leader's power-on through the pinned BMC was accepted for later
// (202, task 7, which still runs: its monitor answers 202 Running) and
// booked in the record (Task, Until TaskLimit ahead). doc.go: every
// replica holds such a host, sending it nothing and taking no evidence
// from it, until StaleReads after the booking's Until or its Returned, and
// a booking past Until with a task and no stamp until its task is read
// ended; bookSend (the normal path) refuses to write over a booking that
// still holds the host.
//
// The new leader's pinned power-on path does not: drivePinnedOn runs
// whatever the record's hold says (checkPin computes serr, then ignores
// it in the BMCChanged branch), and markSent (stillOwed) writes its own
// booking over the live one, whole (sentPatch), so the record no longer
// names task 7. Once that second On returned, and the BMC is restored,
// the host is handed to the reboot package StaleReads later while task 7
// still runs on the BMC and may power the host on after, say, a fence.
func TestReview39ab_PinnedOnReplacesLiveBookingHostHandedOverWhileTaskRuns(t *testing.T) {
	w := newPinnedWorld39ab(t)
	ctx := context.Background()
	until := mustParse39ab(t, w.record(t).Spec.PowerOnSent.Until)
	// The new leader's passes, as the RebootController makes them.
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		_, err := w.p.Controller("h1")
		require.Error(t, err, "premise: the host is held (BMC changed, booking live)")
		if w.record(t).Spec.PowerOnThrough == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	resets := w.b.Resets()
	rec := w.record(t)
	s := rec.Spec.PowerOnSent
	require.NotNil(t, s, "the record keeps a booking")
	assert.Equal(t, queuedTask39ab, s.Task,
		"the record still names the queued task 7 (its monitor still answers 202 Running): a new booking over a live one drops it; "+
			"BMC resets meanwhile %v, booking now %+v", resets, *s)

	// An administrator restores spec.bmc (the reboot client's change is
	// undone): the mark goes, the booking stays (doc.go).
	var bmh metal3.BareMetalHost
	require.NoError(t, w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &bmh))
	bmh.Spec.BMC.Address = w.pinA.Address
	require.NoError(t, w.c.Update(ctx, &bmh))
	var handed error
	end = time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		_, handed = w.p.Controller("h1")
		if handed == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	gets := w.taskGets.Load()
	// Ground truth: the BMC's monitor of task 7 still answers 202 Running
	// (read here, not what the controller was told).
	assert.True(t, errors.Is(handed, ErrInFlight),
		"while the power-on task 7 the record booked still runs on the BMC (Until %s ahead), the host is held, not handed to the "+
			"reboot package: got %v (BMC resets %v, task monitor GETs %d, booking %+v)",
		time.Until(until).Round(time.Second), handed, w.b.Resets(), gets, *w.record(t).Spec.PowerOnSent)
}

func mustParse39ab(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return at
}

// failedTaskBMC39ab wraps a Redfish BMC so that its first reset POST with
// ResetType On is answered 202 Accepted with the task monitor
// failedTask39ab and never carried out: that monitor answers 202 Running
// until ended is set, then 200 with TaskState Exception (the power-on
// failed: the host stays off). Later power-ons are the emulator's own
// (carried out at once).
type failedTaskBMC39ab struct {
	h      http.Handler
	queued atomic.Int32
	ended  atomic.Bool
}

const failedTask39ab = "/redfish/v1/TaskService/Tasks/9"

func (b *failedTaskBMC39ab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.TrimSuffix(r.URL.Path, "/") == failedTask39ab {
		w.Header().Set("Content-Type", "application/json")
		if !b.ended.Load() {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"@odata.id":"` + failedTask39ab + `","Id":"9","TaskState":"Running"}`))
			return
		}
		_, _ = w.Write([]byte(`{"@odata.id":"` + failedTask39ab + `","Id":"9","TaskState":"Exception","TaskStatus":"Critical"}`))
		return
	}
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"ResetType":"On"`)) && b.queued.Add(1) == 1 {
			w.Header().Set("Location", failedTask39ab)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"@odata.id":"` + failedTask39ab + `","Id":"9","TaskState":"Running"}`))
			return
		}
	}
	b.h.ServeHTTP(w, r)
}

// TestReview39ab_PinnedOnOverdueNeverRetriedAfterTaskReadEnded (review 39
// round 17, a booking never cleared): the power-on a host owes through its
// pinned BMC (its BMC changed while its reboot was pending, the pinned BMC
// read Off) was accepted for later as task 9 and not seen to end within
// TaskLimit: the host is left as it is. doc.go: "the owed power-on is not
// tried again by this process (restart it, or restore or accept
// spec.bmc), until that task is read ended: past the booking's Until, any
// replica that finds it ... reads the task monitor ... stamps the booking
// Returned, and the host is acted on StaleReads later". Here the task is
// then read ended (Exception: the power-on failed, the host is still off)
// and the booking stamped Returned, yet pinnedPowerOn keeps the attempt's
// ErrTaskOverdue for good: the owed power-on is never sent again by this
// process, and the host stays off (ground truth: the emulator's hardware)
// until an administrator restarts the controller.
func TestReview39ab_PinnedOnOverdueNeverRetriedAfterTaskReadEnded(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	bmc := &failedTaskBMC39ab{h: redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")}
	srv := httptest.NewServer(bmc)
	t.Cleanup(srv.Close)
	now := time.Now()
	pin := v1alpha1.BMCPin{Address: redfishAt(srv), CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-time.Hour))}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", BMCChanged: &pin, PowerOnThrough: &pin}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", StaleReads: 200 * time.Millisecond,
		Timeout: 5 * time.Second, TaskLimit: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	booking := func() *v1alpha1.PowerOnSent {
		var r v1alpha1.RebootRecord
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &r))
		return r.Spec.PowerOnSent
	}
	attemptOverdue := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		o := p.pinOn["h1"]
		return o != nil && o.finishedOn() && errors.Is(o.err, ErrTaskOverdue)
	}
	// Passes until the attempt's task is overdue (TaskLimit 1 s).
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) && !attemptOverdue() {
		_, _ = p.Controller("h1")
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, attemptOverdue(), "premise: the owed power-on was accepted as task 9, not seen to end within TaskLimit")
	require.Equal(t, int32(1), bmc.queued.Load())
	require.False(t, hw.WasOnAt(time.Now()), "premise: the host is off")

	// The BMC's task ends (the power-on failed); passes go on, each
	// overdueReread taken as passed (as TestTaskHoldReadsOverdueTask does).
	bmc.ended.Store(true)
	var stamped time.Time
	var last error
	end = time.Now().Add(8 * time.Second)
	for time.Now().Before(end) && !hw.WasOnAt(time.Now()) {
		_, last = p.Controller("h1")
		p.mu.Lock()
		if r := p.tasks["h1"]; r != nil && r.finished() && !r.cleared {
			r.end = time.Now().Add(-overdueReread)
		}
		p.mu.Unlock()
		if s := booking(); stamped.IsZero() && s != nil && s.Returned != "" {
			stamped = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.False(t, stamped.IsZero(), "premise: the task was read ended and the booking stamped Returned (last pass: %v)", last)
	assert.True(t, hw.WasOnAt(time.Now()),
		"task 9 was read ended (Exception) and the booking stamped Returned %s ago, the host is still off and still owed its power-on: "+
			"it is sent again (BMC resets %d, last pass: %v)", time.Since(stamped).Round(100*time.Millisecond), bmc.queued.Load(), last)
}

// TestReview39ab_BMCErrorTextEscapesReachEvents (REVIEW.md point 6, a
// BMC's error text with terminal escapes): a host's BMC answers its power
// reading with a Redfish error whose message carries terminal escape
// sequences (OSC 52 writes the reader's clipboard, OSC 0 retitles the
// window, CSI 2J clears the screen). The controller tells the operator of
// the failure with a RebootPowerError event on the host, which `kubectl
// describe bmh` and `kubectl get events` print on the operator's
// terminal. The module's own rule for a peer's words (internal/termsafe,
// used by inventory and rebootctl: "never a control character") is not
// applied in kube: the BMC's escapes reach the event as sent.
func TestReview39ab_BMCErrorTextEscapesReachEvents(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: redfishAt(srv), CredentialsName: "h1-bmc"}}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", LastBMC: pinOf(bmh, stamp(time.Now().Add(-time.Hour)))}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", StaleReads: 100 * time.Millisecond, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	const hostile = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;owned\x07\x1b[2Jcall your operator"
	body := `{"error":{"code":"Base.1.0.GeneralError","message":"` + strings.ReplaceAll(hostile, "\x1b", `\u001b`) + `"}}`
	body = strings.ReplaceAll(body, "\x07", `\u0007`)
	for range 20 {
		b.FailNextGet("/redfish/v1/Systems/1", http.StatusInternalServerError, body)
	}
	evr := events.NewFakeRecorder(50)
	rc := &RebootController{Namespace: "ns", Client: c, Recorder: evr, IdlePoll: time.Second, Ownership: Ownership{NoOperator: true},
		Reconciler: &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: "ns"}, Now: time.Now, Power: p.Controller}}
	var evs []string
	for range 5 {
		b.FailNextGet("/redfish/v1/Systems/1", http.StatusInternalServerError, body)
		_, _ = rc.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "h1"}})
		evs = append(evs, drainEvents(evr)...)
	}
	var bmcWords []string
	for _, e := range evs {
		if strings.Contains(e, "call your operator") {
			bmcWords = append(bmcWords, e)
		}
	}
	require.NotEmpty(t, bmcWords, "premise: the BMC's error reaches an event (events %q)", evs)
	for _, e := range bmcWords {
		assert.False(t, strings.ContainsAny(e, "\x1b\x07"), "an event carries the BMC's terminal escapes as sent: %q", e)
	}
}

// TestReview39ab_PinnedOnSentAfterOperatorTookHostBack (issue 39 point 1;
// doc.go: "A host stops being rebootkit's the moment its annotation
// goes"): a detached host of rebootkit's owes a power-on through its
// pinned BMC (its BMC changed while its reboot was pending, the pinned BMC
// read Off). A pass starts the attempt, which waits StaleReads, reads the
// host and its record again (stillOwed) and sends the On. Meanwhile the
// detached annotation is removed: the baremetal-operator takes the host
// back and powers it through Ironic. The attempt's re-read checks the
// host's UID, the mark and onEligible (online, deprovisioning, request)
// but not whether the host is still rebootkit's: the On goes out to a
// host the operator owns (ground truth: the BMC emulator's reset log and
// hardware), two actors on one host.
func TestReview39ab_PinnedOnSentAfterOperatorTookHostBack(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	now := time.Now()
	pin := v1alpha1.BMCPin{Address: redfishAt(srv), CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-time.Hour))}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1",
		Annotations: map[string]string{metal3.DetachedAnnotation: ""}},
		Spec:   metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}},
		Status: metal3.BareMetalHostStatus{OperationalStatus: metal3.OperationalStatusDetached}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", BMCChanged: &pin, PowerOnThrough: &pin}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", StaleReads: time.Second, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	own := Ownership{}
	require.True(t, func() bool { ok, _ := own.Ours(bmh); return ok }(), "premise: the host is rebootkit's (detached)")

	// The pass of a host of rebootkit's: the owed power-on's attempt starts.
	_, err := p.Controller("h1")
	require.ErrorIs(t, err, ErrBMCChanged)
	p.mu.Lock()
	started := p.pinOn["h1"] != nil
	p.mu.Unlock()
	require.True(t, started, "premise: the attempt started (%v)", err)

	// The operator takes the host back: the annotation goes (and, once
	// the operator registered it again, operationalStatus is OK).
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &h))
	delete(h.Annotations, metal3.DetachedAnnotation)
	h.Status.OperationalStatus = metal3.OperationalStatusOK
	require.NoError(t, c.Update(ctx, &h))
	released := time.Now()
	ok, _ := own.Ours(&h)
	require.False(t, ok, "premise: the host is no longer rebootkit's")

	// No pass of the host any more (the RebootController refuses it); the
	// attempt ends on its own.
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		p.mu.Lock()
		o := p.pinOn["h1"]
		done := o == nil || o.finishedOn()
		p.mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, b.Resets(), "a power-on went to the BMC of a host the operator took back %s before", time.Since(released).Round(100*time.Millisecond))
	assert.False(t, hw.WasOnAt(time.Now()), "the host the operator owns was powered on by rebootkit")
}
