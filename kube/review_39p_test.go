package kube

import (
	"context"
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

// normalPathController39p starts, on its own manager, one replica of the
// reboot controller as TestReview39_QueuedOnOfNormalPathTakenAsLanded
// runs it (Powers, Async, the pool), and returns its stop (the replica
// is gone: a restart, a lost lease) and its events.
func normalPathController39p(t *testing.T, ns, name string, stale time.Duration) (stop func(), rec *events.FakeRecorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr := managerAs(t, asController(t, ns), ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 10 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	async := &Async{Power: powers.Controller, Timeout: time.Minute}
	powers.Done = func(name string) {
		if async.Done != nil {
			async.Done(name)
		}
	}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: async.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec = events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: name + "-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec, Async: async,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait(); powers.Close() }) }
	t.Cleanup(stop)
	return stop, rec
}

// fencedSince39p polls the record until deadline and returns the first
// instant it reports the keyed request asked at asked fenced (zero if
// never).
func fencedSince39p(ctx context.Context, direct client.Client, ns string, asked, deadline time.Time) time.Time {
	key := types.NamespacedName{Namespace: ns, Name: "h1"}
	for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if direct.Get(ctx, key, &h) == nil && direct.Get(ctx, key, &r) == nil {
			if st, ok := recordStatus(&r, &h, true); ok && st.Fenced(asked, time.Now()) {
				return time.Now()
			}
		}
	}
	return time.Time{}
}

// TestReview39_QueuedOnOfNormalPathLandsAfterNewLeaderFences: the
// round-14 fix keeps the normal path's power-on that the BMC accepted as
// a task (202) in flight only in the memory of the replica that sent it
// (Async.follow); nothing of the task reaches the record (only the pinned
// path writes PowerOnSent.Task). A keyed hard hold powers the host off
// and is withdrawn; the controller powers the host on, the BMC answers
// 202 with a task monitor (Running) and carries the On out 8 s later
// (well inside DefaultTaskLimit, 10 min, the bound the fix itself sets
// for a task). The replica that sent it then goes (a restart, a lost
// lease) and the fencer asks for the keyed hold again; the next replica
// knows nothing of the task, reads the host Off (the task has not run),
// reports the request fenced, and the first replica's queued On then
// powers on the host it reported fenced. Ground truth: the BMC's
// hardware (fake.Power) must stay off from the first instant the record
// reports the request fenced. Correct: the record keeps the task of a
// normal-path command accepted for later (as PowerOnSent.Task does for
// the pinned path) and a replica that did not send it reads its monitor
// (or waits up to TaskLimit) before it powers or takes evidence from the
// host.
func TestReview39_QueuedOnOfNormalPathLandsAfterNewLeaderFences(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const landDelay = 8 * time.Second
	const stale = 500 * time.Millisecond
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	var armed, landed atomic.Bool
	answered := make(chan time.Time, 1)
	srv := httptest.NewServer(taskOn39o(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"), &armed, landDelay,
		func() { _ = hw.On(context.Background()); landed.Store(true) }, answered))
	defer srv.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv) }))
	stop1, rec1 := normalPathController39p(t, ns, "reboot", stale)

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
	}, 15*time.Second, 20*time.Millisecond, "premise: the keyed hold powers the host off and reports it; events %q", drainEvents(rec1))
	armed.Store(true)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	var at time.Time
	select {
	case at = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatalf("premise: the withdrawn hold ends with a power-on, answered 202 (calls %+v; events %q)", hw.Calls(), drainEvents(rec1))
	}
	stop1() // the replica that sent the On goes
	asked := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", hold39m))
	_, rec2 := normalPathController39p(t, ns, "reboot2", stale)
	end := at.Add(landDelay + time.Second)
	fencedAt := fencedSince39p(ctx, direct, ns, asked, end)
	time.Sleep(time.Until(end))
	require.True(t, landed.Load(), "premise: the queued On landed")
	if fencedAt.IsZero() {
		return // not reported fenced before the On landed: correct
	}
	assert.True(t, hw.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced by the next replica (at %v after the 202, %v after the request) stays off while it is held: "+
			"the previous replica's power-on the BMC accepted as a task (202, monitor Running) lands after it "+
			"(transitions %+v; calls %+v; events %q)",
		fencedAt.Sub(at), fencedAt.Sub(asked), hw.Transitions(), hw.Calls(), drainEvents(rec2))
}

// queuingSoftOff39p is a BMC that accepts a graceful shutdown as a task
// (power.NoteTask) that stays Running for ever (the OS ignores the
// ACPI request, as a hung or fenced-for-a-reason host does), while a
// forced power-off is carried out at once by the hardware.
type queuingSoftOff39p struct{ *fake.Power }

func (q *queuingSoftOff39p) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft {
		power.NoteTask(ctx, "/redfish/v1/TaskService/Tasks/soft", func(context.Context) (bool, error) { return false, nil })
		return nil
	}
	return q.Power.Off(ctx, m)
}

// TestReview39_QueuedSoftOffBlocksHardFallback: reboot/doc.go says a
// soft power-off (the default mode of every hold, a fence included)
// "falls back to hard Config.SoftTimeout (180 s) after its first soft
// power-off". The round-14 fix keeps any command the BMC accepted for
// later in flight in Async until its task ended or the host reads the
// wanted state, for up to TaskLimit (10 min), and refuses every other
// call of the host meanwhile (ErrInFlight). A BMC that answers
// GracefulShutdown 202 with a task that runs until the OS has shut down
// (a hung OS: never) thus holds back the forced power-off the fallback
// sends, so a host being fenced keeps running for TaskLimit (10 min)
// instead of SoftTimeout. A ForceOff can power nothing on (it is not a
// toggle: TogglesOff false), so nothing justifies holding it behind a
// pending graceful shutdown. Ground truth: the hardware (fake.Power)
// must be off within a few seconds of the hard power-off being asked
// for (here 1 s after the soft one, standing in for SoftTimeout), with
// the production TaskLimit. Correct: a pending task of a non-toggling
// power-off does not hold back a non-toggling power-off (or Async
// follows a queued soft power-off only as long as the reboot package's
// SoftTimeout).
func TestReview39_QueuedSoftOffBlocksHardFallback(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := &queuingSoftOff39p{Power: hw}
	a := &Async{Wait: 50 * time.Millisecond, TaskPoll: 50 * time.Millisecond,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	pc, err := a.Controller("h")
	require.NoError(t, err)
	ctx := context.Background()
	err = pc.Off(ctx, power.ModeSoft)
	require.True(t, err == nil || isInFlight(err), "premise: the soft power-off is accepted (%v)", err)
	require.True(t, hw.WasOnAt(time.Now()), "premise: the OS ignores the shutdown")
	time.Sleep(time.Second) // SoftTimeout passes: the reboot package falls back to hard
	asked := time.Now()
	var last error
	for end := asked.Add(3 * time.Second); time.Now().Before(end) && hw.WasOnAt(time.Now()); time.Sleep(50 * time.Millisecond) {
		last = pc.Off(ctx, power.ModeHard)
	}
	assert.False(t, hw.WasOnAt(time.Now()),
		"the hard fallback of a soft power-off whose task never ends is carried out within 3 s of being asked for "+
			"(not held back for Async.TaskLimit, %s); the last hard power-off got: %v", a.taskLimit(), last)
}

// queuedPress39p is a BMC whose soft power-off is a press of the power
// button (TogglesOff(soft): PushPowerButton) that it accepts as a task
// (power.NoteTask) and carries out only when press is called: the press
// toggles the hardware, whatever its state then. A forced power-off is
// carried out at once.
type queuedPress39p struct {
	*fake.Power
	pressed atomic.Bool
}

func (q *queuedPress39p) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft {
		power.NoteTask(ctx, "/redfish/v1/TaskService/Tasks/press", func(context.Context) (bool, error) { return q.pressed.Load(), nil })
		return nil
	}
	return q.Power.Off(ctx, m)
}

func (q *queuedPress39p) TogglesOff(m power.Mode) bool { return m == power.ModeSoft }

func (q *queuedPress39p) press() {
	if q.Power.WasOnAt(time.Now()) {
		_ = q.Power.Off(context.Background(), power.ModeHard)
	} else {
		_ = q.Power.On(context.Background())
	}
	q.pressed.Store(true)
}

// TestReview39_QueuedPressOffOverdueLetsHardOffThenPowersOn: Async
// leaves a host as it is (ErrTaskOverdue) when the task of a power-on or
// a restart outlives TaskLimit, but not one of a power-off: "a power-off
// it may still carry out powers nothing on" (async.go, d5865d6). A soft
// power-off may be a press of the power button (PushPowerButton:
// Async.TogglesOff passes it on), and a press toggles: carried out once
// the host is off, it powers the host on. Here the BMC accepts the press
// as a task that is still Running at TaskLimit; Async then frees the
// host, counting the answer as lost; the reboot package's fallback (after
// its own LostLanding + SoftTimeout + StaleReads for a lost press, far
// shorter than a task may run: the test sends it at once) sends
// a forced power-off (accepted: nothing holds it), the host goes off,
// and then the queued press is carried out and powers on the host that
// rebootkit has just powered off (a fence reported on the Off reading
// would be broken). Ground truth: the hardware is on after the press
// while rebootkit's last command to it was a forced power-off. Correct:
// past TaskLimit, a toggling power-off's task leaves the host as it is
// (ErrTaskOverdue), as a power-on's does; Async knows it is a toggle
// (TogglesOff).
func TestReview39_QueuedPressOffOverdueLetsHardOffThenPowersOn(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := &queuedPress39p{Power: hw}
	a := &Async{Wait: 50 * time.Millisecond, TaskPoll: 20 * time.Millisecond, TaskLimit: 300 * time.Millisecond,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	pc, err := a.Controller("h")
	require.NoError(t, err)
	require.True(t, pc.(*asyncController).TogglesOff(power.ModeSoft), "premise: Async says the soft power-off is a press")
	ctx := context.Background()
	err = pc.Off(ctx, power.ModeSoft)
	require.True(t, err == nil || isInFlight(err), "premise: the press is accepted for later (%v)", err)
	require.Eventually(t, func() bool { return !a.InFlight("h") }, 5*time.Second, 5*time.Millisecond, "premise: followed for TaskLimit")
	hardErr := pc.Off(ctx, power.ModeHard)
	bmc.press() // the queued press is carried out
	assert.False(t, hw.WasOnAt(time.Now()),
		"a press accepted as a task that outlived TaskLimit may still toggle: no forced power-off may be sent meanwhile "+
			"that it would then reverse (the forced power-off got %v; transitions %+v)", hardErr, hw.Transitions())
}
