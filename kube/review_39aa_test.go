package kube

import (
	"bytes"
	"context"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// deadClient39aa is a replica's client that stops writing once dead is
// set: the process is gone (a crash, an evicted pod), so nothing it
// still runs in the background reaches the API server.
type deadClient39aa struct {
	client.Client
	dead *atomic.Bool
}

var errDead39aa = errors.New("review 39aa: the replica is gone")

func (c deadClient39aa) Patch(ctx context.Context, obj client.Object, p client.Patch, o ...client.PatchOption) error {
	if c.dead.Load() {
		return errDead39aa
	}
	return c.Client.Patch(ctx, obj, p, o...)
}

func (c deadClient39aa) Update(ctx context.Context, obj client.Object, o ...client.UpdateOption) error {
	if c.dead.Load() {
		return errDead39aa
	}
	return c.Client.Update(ctx, obj, o...)
}

func (c deadClient39aa) Create(ctx context.Context, obj client.Object, o ...client.CreateOption) error {
	if c.dead.Load() {
		return errDead39aa
	}
	return c.Client.Create(ctx, obj, o...)
}

// replica39aa starts one replica of the reboot controller as the binary
// runs it (Powers, Async with taskLimit, the pool) on its own manager;
// kill makes it gone (its manager stopped, its background writes
// refused, as a crashed process's).
func replica39aa(t *testing.T, ns, name string, stale, taskLimit time.Duration) (kill func(), rec *events.FakeRecorder) {
	kill, rec, _ = replicaDead39aa(t, ns, name, stale, taskLimit)
	return kill, rec
}

// replicaDead39aa is replica39aa, and also returns the flag that makes
// the replica's writes fail at once (it crashed at that instant).
func replicaDead39aa(t *testing.T, ns, name string, stale, taskLimit time.Duration) (kill func(), rec *events.FakeRecorder, dead *atomic.Bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr := managerAs(t, asController(t, ns), ns)
	dead = new(atomic.Bool)
	c := deadClient39aa{Client: mgr.GetClient(), dead: dead}
	powers := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 10 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale, TaskLimit: taskLimit,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	async := &Async{Power: powers.Controller, Timeout: time.Minute, TaskLimit: taskLimit, TaskPoll: 100 * time.Millisecond}
	powers.Done = func(name string) {
		if async.Done != nil {
			async.Done(name)
		}
	}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: ns}, Now: time.Now, Power: async.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec = events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: name + "-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec, Async: async,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	var once sync.Once
	kill = func() { once.Do(func() { dead.Store(true); cancel(); wg.Wait(); powers.Close() }) }
	t.Cleanup(kill)
	return kill, rec, dead
}

// tasks39aa wraps a Redfish BMC so that, while armed, every reset POST
// with ResetType On is answered at once 202 Accepted with a task monitor
// of its own (/redfish/v1/TaskService/Tasks/39aa-N), and carried out by
// the hardware only delay(N) later (N from 1); each monitor is served
// truthfully: Running until its On landed, then Completed. answered gets
// the instant of each 202.
type tasks39aa struct {
	h        http.Handler
	hw       *fake.Power
	armed    atomic.Bool
	delay    func(n int) time.Duration
	answered chan time.Time
	before   atomic.Pointer[func()] // if set, runs before a 202 is answered

	mu     sync.Mutex
	n      int
	landed map[string]bool
}

func (b *tasks39aa) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/redfish/v1/TaskService/Tasks/39aa-"
	if p := strings.TrimSuffix(r.URL.Path, "/"); strings.HasPrefix(p, prefix) {
		b.mu.Lock()
		done := b.landed[p]
		b.mu.Unlock()
		state, code := "Running", http.StatusAccepted
		if done {
			state, code = "Completed", http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":%q,"TaskState":%q,"TaskStatus":"OK"}`, p, strings.TrimPrefix(p, "/redfish/v1/TaskService/Tasks/"), state)
		return
	}
	if b.armed.Load() && r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"ResetType":"On"`)) {
			b.mu.Lock()
			b.n++
			n := b.n
			b.mu.Unlock()
			monitor := fmt.Sprintf("%s%d", prefix, n)
			if f := b.before.Load(); f != nil {
				(*f)()
			}
			w.Header().Set("Location", monitor)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":"39aa-%d","TaskState":"Running"}`, monitor, n)
			b.answered <- time.Now()
			time.AfterFunc(b.delay(n), func() {
				_ = b.hw.On(context.Background())
				b.mu.Lock()
				if b.landed == nil {
					b.landed = map[string]bool{}
				}
				b.landed[monitor] = true
				b.mu.Unlock()
			})
			return
		}
	}
	b.h.ServeHTTP(w, r)
}

func (b *tasks39aa) landedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.landed)
}

// world39aa is one host h1 on a BMC that queues its power-ons (tasks39aa).
type world39aa struct {
	direct client.Client
	ns     string
	hw     *fake.Power
	bmc    *tasks39aa
	key    types.NamespacedName
}

func newWorld39aa(t *testing.T, delay func(n int) time.Duration) *world39aa {
	t.Helper()
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := &tasks39aa{h: redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"), hw: hw, delay: delay, answered: make(chan time.Time, 16)}
	srv := httptest.NewServer(bmc)
	t.Cleanup(srv.Close)
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv) }))
	return &world39aa{direct: direct, ns: ns, hw: hw, bmc: bmc, key: types.NamespacedName{Namespace: ns, Name: "h1"}}
}

// holdOff asks the keyed hard hold and waits until the record reports it
// (LastPoweredOff after asked) and the hardware is off.
func (w *world39aa) holdOff(t *testing.T, rec *events.FakeRecorder) {
	t.Helper()
	ctx := context.Background()
	asked := time.Now()
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", hold39m))
	require.Eventually(t, func() bool {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if w.direct.Get(ctx, w.key, &h) != nil || w.direct.Get(ctx, w.key, &r) != nil {
			return false
		}
		st, ok := recordStatus(&r, &h, true)
		return ok && st.LastPoweredOff.After(asked) && !w.hw.WasOnAt(time.Now())
	}, 20*time.Second, 20*time.Millisecond, "premise: the keyed hold powers the host off and reports it; events %q", drainEvents(rec))
}

// release withdraws the keyed hold and returns the instant of the 202
// the power-on that follows gets.
func (w *world39aa) release(t *testing.T, rec *events.FakeRecorder) time.Time {
	t.Helper()
	require.NoError(t, change(context.Background(), w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	select {
	case at := <-w.bmc.answered:
		return at
	case <-time.After(15 * time.Second):
		t.Fatalf("premise: the withdrawn hold ends with a power-on, answered 202 (calls %+v; events %q)", w.hw.Calls(), drainEvents(rec))
	}
	return time.Time{}
}

func (w *world39aa) record(t *testing.T) v1alpha1.RebootRecord {
	t.Helper()
	var r v1alpha1.RebootRecord
	require.NoError(t, w.direct.Get(context.Background(), w.key, &r))
	return r
}

// TestReview39aa_SecondQueuedOnKeepsOldReturnedNewLeaderFences: the
// round-15 fix books a normal-path power-on the BMC accepted for later
// in the host's record (Powers.bookTask: spec.powerOnSent {address, at,
// until, task}) so that every replica holds the host until StaleReads
// after the task ended (Returned) or, without that, to Until. It writes
// that with a JSON merge patch, and powerOnSent is never removed after
// its wait is over, so on any host whose record already shows an ended
// booking (Returned from the previous reboot's task) the new booking
// keeps the old Returned; sentHold takes the earlier of Returned and
// Until, the old Returned, and the new task holds nobody. Here: a keyed
// hard hold powers the host off and is withdrawn; the On is answered 202
// and its task ends 0.5 s later (the sender stamps Returned). The same
// again, but the second On's task runs 8 s: the replica that sent it goes
// (a crash), the fencer asks for the hold again, and the next replica
// reads the host Off (the task has not run), reports the request fenced,
// and the queued On then powers on the host it reported fenced. Ground
// truth: the hardware (fake.Power) must stay off from the first instant
// the record reports the request fenced. Correct: a booking replaces the
// whole powerOnSent (Returned cleared), or the hold reads Returned only
// when it belongs to that booking's At.
func TestReview39aa_SecondQueuedOnKeepsOldReturnedNewLeaderFences(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const stale = 500 * time.Millisecond
	const landDelay = 8 * time.Second
	w := newWorld39aa(t, func(n int) time.Duration {
		if n == 1 {
			return 500 * time.Millisecond
		}
		return landDelay
	})
	kill1, rec1 := replica39aa(t, w.ns, "reboot", stale, 0)
	w.holdOff(t, rec1)
	w.bmc.armed.Store(true)
	w.release(t, rec1)
	require.Eventually(t, func() bool {
		r := w.record(t)
		return r.Spec.PowerOnSent != nil && r.Spec.PowerOnSent.Returned != "" && w.hw.WasOnAt(time.Now())
	}, 15*time.Second, 20*time.Millisecond, "premise: the first queued On lands and its booking is stamped Returned; events %q", drainEvents(rec1))
	first := *w.record(t).Spec.PowerOnSent

	w.holdOff(t, rec1)
	at := w.release(t, rec1)
	require.Eventually(t, func() bool {
		r := w.record(t)
		return r.Spec.PowerOnSent != nil && r.Spec.PowerOnSent.At != first.At
	}, 5*time.Second, 10*time.Millisecond, "premise: the second queued On is booked in the record")
	booked := *w.record(t).Spec.PowerOnSent
	kill1() // the replica that sent the second On goes
	asked := time.Now()
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", hold39m))
	_, rec2 := replica39aa(t, w.ns, "reboot2", stale, 0)
	end := at.Add(landDelay + time.Second)
	fencedAt := fencedSince39p(ctx, w.direct, w.ns, asked, end)
	time.Sleep(time.Until(end))
	require.Equal(t, 2, w.bmc.landedCount(), "premise: both queued Ons landed")
	if fencedAt.IsZero() {
		return // not reported fenced before the On landed: correct
	}
	assert.True(t, w.hw.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced by the next replica (%v after the second 202) stays off while it is held: the second "+
			"booking (%+v) kept the first one's Returned (%+v), so it held nobody, and its queued On landed after the fence "+
			"(transitions %+v; events %q)",
		fencedAt.Sub(at), booked, first, w.hw.Transitions(), drainEvents(rec2))
}

// TestReview39aa_SenderGoneEndedTaskHoldsHostForGood: the round-15 fix's
// booking (spec.powerOnSent with the task's monitor) is read by a
// replica that did not send the command only as a deadline: "a replica
// that did not send it does not read the task itself", so once the
// sender is gone (a crash, a rollout: a routine event) the host is held
// to Until (TaskLimit after the 202) and then, as no Returned will ever
// be written, for good (ErrTaskOverdue) until an administrator removes
// powerOnSent, although the record names the task monitor and the BMC
// answers it Completed. Here (TaskLimit 3 s, StaleReads 0.5 s): the
// power-on that ends a withdrawn hold is answered 202 and its task
// completes 1 s later (the host runs); the sender crashed right after
// its booking. A fencer asks for the keyed hold: the BMC is healthy and
// its task monitor says the task ended, yet no replica ever powers the
// host off. Ground truth: the hardware must be off within TaskLimit +
// StaleReads + 10 s of the request (the fence REVIEW asks to be bounded);
// today it runs throughout and every pass gets ErrTaskOverdue. Correct:
// a replica that finds a booking with a task it did not send reads that
// task's monitor (through the pinned BMC) and ends the hold StaleReads
// after it ended.
func TestReview39aa_SenderGoneEndedTaskHoldsHostForGood(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const stale = 500 * time.Millisecond
	const taskLimit = 3 * time.Second
	w := newWorld39aa(t, func(int) time.Duration { return time.Second })
	kill1, rec1 := replica39aa(t, w.ns, "reboot", stale, taskLimit)
	w.holdOff(t, rec1)
	w.bmc.armed.Store(true)
	w.release(t, rec1)
	require.Eventually(t, func() bool {
		r := w.record(t)
		return r.Spec.PowerOnSent != nil && r.Spec.PowerOnSent.Task != ""
	}, 5*time.Second, 10*time.Millisecond, "premise: the queued On is booked in the record")
	kill1() // the sender crashes before its task ends
	require.Eventually(t, func() bool { return w.bmc.landedCount() == 1 && w.hw.WasOnAt(time.Now()) },
		5*time.Second, 20*time.Millisecond, "premise: the queued On lands, its monitor says Completed")
	asked := time.Now()
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", hold39m))
	_, rec2 := replica39aa(t, w.ns, "reboot2", stale, taskLimit)
	deadline := asked.Add(taskLimit + stale + 10*time.Second)
	for time.Now().Before(deadline) && w.hw.WasOnAt(time.Now()) {
		time.Sleep(50 * time.Millisecond)
	}
	r := w.record(t)
	assert.False(t, w.hw.WasOnAt(time.Now()),
		"a keyed hold asked of a healthy host whose queued On's task ended (monitor Completed) powers it off within "+
			"TaskLimit+StaleReads+10s (%v): the replica that sent it crashed, and the next one holds the host for good "+
			"(powerOnSent %+v; calls %+v; events %q)",
		taskLimit+stale+10*time.Second, r.Spec.PowerOnSent, w.hw.Calls(), drainEvents(rec2))
}

// TestReview39aa_CrashBetween202AndBookingNewLeaderFences: the round-15
// fix records a normal-path power-on the BMC accepted for later in the
// host's record only once the 202 came back (Async.run: bookTaskOf after
// f returned), not before the command is sent, as the pinned path's
// markSent does ("persist intent before acting"). A replica that stops
// between the BMC's 202 and that write (a crash, an eviction, a pause
// across its lease's end: the write is a second round trip to the API
// server after the BMC's answer) leaves no trace of the task; the next
// replica reads the host Off (the task has not run), reports a keyed hold
// fenced, and the queued On then powers on the host it reported fenced.
// Here the sender's writes fail from the instant the BMC answers the On
// 202 (the task runs 8 s); the fencer asks the hold again. Ground truth:
// the hardware must stay off from the first instant the record reports
// the request fenced. Correct: the command that may be accepted for
// later is booked in the record (a hold to TaskLimit) before it is sent,
// and shortened once its answer says it landed or was refused.
func TestReview39aa_CrashBetween202AndBookingNewLeaderFences(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const stale = 500 * time.Millisecond
	const landDelay = 8 * time.Second
	w := newWorld39aa(t, func(int) time.Duration { return landDelay })
	kill1, rec1, dead1 := replicaDead39aa(t, w.ns, "reboot", stale, 0)
	w.holdOff(t, rec1)
	crash := func() { dead1.Store(true) }
	w.bmc.before.Store(&crash)
	w.bmc.armed.Store(true)
	at := w.release(t, rec1)
	kill1()
	asked := time.Now()
	require.NoError(t, change(ctx, w.direct, w.ns, "h1", hold39m))
	_, rec2 := replica39aa(t, w.ns, "reboot2", stale, 0)
	end := at.Add(landDelay + time.Second)
	fencedAt := fencedSince39p(ctx, w.direct, w.ns, asked, end)
	time.Sleep(time.Until(end))
	require.Equal(t, 1, w.bmc.landedCount(), "premise: the queued On landed")
	if fencedAt.IsZero() {
		return // not reported fenced before the On landed: correct
	}
	r := w.record(t)
	assert.True(t, w.hw.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced by the next replica (%v after the 202) stays off while it is held: the sender crashed "+
			"between the BMC's 202 and its booking, so no record of the task held the next replica, and the queued On landed "+
			"after the fence (powerOnSent %+v; transitions %+v; events %q)",
		fencedAt.Sub(at), r.Spec.PowerOnSent, w.hw.Transitions(), drainEvents(rec2))
}

// TestReview39aa_BookingKeepsStaleReturnedHoldsNobody: the mechanism of
// TestReview39aa_SecondQueuedOnKeepsOldReturnedNewLeaderFences, without
// an API server: Powers.bookTask writes the new booking
// ({address, at, until, task}) as a JSON merge patch into a powerOnSent
// that still shows the previous booking's Returned (nothing removes
// powerOnSent once its wait is over), so the record ends with the new At,
// Until and Task and the old Returned, and sentHold (the hold of every
// replica that did not send the command) ends the new task's wait at the
// old Returned: a task accepted a moment ago holds nobody. Correct: the
// booking just written holds the host (ErrInFlight) until its task is
// recorded ended or Until passed.
func TestReview39aa_BookingKeepsStaleReturnedHoldsNobody(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	old := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{PowerOnSent: &v1alpha1.PowerOnSent{Address: "redfish://10.0.0.1", At: stamp(now.Add(-time.Hour)),
			Until: stamp(now.Add(-50 * time.Minute)), Task: "/redfish/v1/TaskService/Tasks/1", Returned: stamp(now.Add(-59 * time.Minute))}}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(old).Build()
	p := &Powers{Client: c, Secrets: c, Namespace: "ns", StaleReads: 30 * time.Second, Timeout: 5 * time.Second}
	at := p.bookTask(ctx, "h1", "redfish://10.0.0.1", now, "/redfish/v1/TaskService/Tasks/2", now.Add(DefaultTaskLimit))
	require.NotEmpty(t, at, "premise: the booking is written")
	var rec v1alpha1.RebootRecord
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
	require.Equal(t, "/redfish/v1/TaskService/Tasks/2", rec.Spec.PowerOnSent.Task, "premise: the record shows the new task")
	err := p.sentHold(&rec, "h1")
	assert.ErrorIs(t, err, ErrInFlight,
		"a power-on the BMC accepted as a task a moment ago holds the host in every replica; the record's powerOnSent is %+v",
		*rec.Spec.PowerOnSent)
}
