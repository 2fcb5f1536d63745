package kube

import (
	"context"
	"errors"
	"fmt"
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

// TestMarkSentReplacesEndedBooking (review 39 round 16, the pinned
// path's side of TestReview39aa_BookingKeepsStaleReturnedHoldsNobody):
// markSent, the booking of a power-on through a pinned BMC written just
// before it is sent, replaces a record's earlier booking whole: that
// booking's Returned (its task ended an hour ago) and Task do not survive
// into the new one, so the new one holds the host (sentHold: ErrInFlight)
// in every replica; before, the merge kept the old Returned and the new
// On held nobody. markTask then adds its task to this booking only.
func TestMarkSentReplacesEndedBooking(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	pin := v1alpha1.BMCPin{Address: "redfish://10.0.0.1/redfish/v1/Systems/1", CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-2 * time.Hour))}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "other"}}}
	old := &v1alpha1.PowerOnSent{Address: pin.Address, At: stamp(now.Add(-time.Hour)), Until: stamp(now.Add(-50 * time.Minute)),
		Task: "/redfish/v1/TaskService/Tasks/1", Returned: stamp(now.Add(-59 * time.Minute))}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", BMCChanged: &pin, PowerOnThrough: &pin, PowerOnSent: old}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec).Build()
	p := &Powers{Client: c, Secrets: c, Namespace: "ns", StaleReads: 30 * time.Second, Timeout: 5 * time.Second}
	require.NoError(t, p.sentHold(rec, "h1"), "premise: the earlier booking's wait is over")
	o := &pinnedOn{pin: pin, done: make(chan struct{})}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, p.markSent(sctx, bmh, o), "premise: the power-on is owed and recorded")
	var got v1alpha1.RebootRecord
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &got))
	s := got.Spec.PowerOnSent
	require.NotNil(t, s)
	assert.Equal(t, o.sentAt, s.At, "the new booking")
	assert.Empty(t, s.Returned, "the earlier booking's Returned does not survive into the new one")
	assert.Empty(t, s.Task, "nor its Task")
	assert.ErrorIs(t, p.sentHold(&got, "h1"), ErrInFlight, "the power-on just booked holds the host; powerOnSent %+v", *s)

	p.markTask(ctx, "h1", o, "/redfish/v1/TaskService/Tasks/2")
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &got))
	assert.Equal(t, "/redfish/v1/TaskService/Tasks/2", got.Spec.PowerOnSent.Task)
	assert.Empty(t, got.Spec.PowerOnSent.Returned)
	assert.ErrorIs(t, p.sentHold(&got, "h1"), ErrInFlight)
}

// TestSentHoldIgnoresReturnedBeforeAt: a Returned stamped before its
// booking's At is an earlier booking's (a record merged by an older
// controller): it ends nothing; one after Until holds to it.
func TestSentHoldIgnoresReturnedBeforeAt(t *testing.T) {
	p := &Powers{Namespace: "ns", StaleReads: time.Second}
	now := time.Now()
	rec := &v1alpha1.RebootRecord{Spec: v1alpha1.RebootRecordSpec{PowerOnSent: &v1alpha1.PowerOnSent{Address: "redfish://bmc",
		At: stamp(now.Add(-time.Second)), Until: stamp(now.Add(time.Hour)), Task: "/redfish/v1/TaskService/Tasks/2", Returned: stamp(now.Add(-time.Hour))}}}
	assert.ErrorIs(t, p.sentHold(rec, "h1"), ErrInFlight)
	rec.Spec.PowerOnSent.At, rec.Spec.PowerOnSent.Until = stamp(now.Add(-time.Hour)), stamp(now.Add(-time.Minute))
	rec.Spec.PowerOnSent.Returned = stamp(now.Add(-100 * time.Millisecond))
	err := p.sentHold(rec, "h1")
	assert.ErrorIs(t, err, ErrInFlight, "a Returned after Until (a task read ended late) holds StaleReads after it")
	assert.NotErrorIs(t, err, ErrTaskOverdue)
}

// overdueWorld is a host h1 on a Redfish BMC whose task monitor
// /redfish/v1/TaskService/Tasks/7 answers what answer says, with a record
// that shows a booking of a command accepted as that task, past its
// Until, with no Returned (its sender gone).
type overdueWorld struct {
	p      *Powers
	c      client.Client
	bmh    *metal3.BareMetalHost
	reads  *atomic.Int32
	answer *atomic.Value // func(http.ResponseWriter)
}

const overdueTask = "/redfish/v1/TaskService/Tasks/7"

func newOverdueWorld(t *testing.T, trusted bool) *overdueWorld {
	t.Helper()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	w := &overdueWorld{reads: new(atomic.Int32), answer: new(atomic.Value)}
	w.answer.Store(func(rw http.ResponseWriter) {
		rw.WriteHeader(http.StatusAccepted)
		_, _ = rw.Write([]byte(`{"TaskState":"Running"}`))
	})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") == overdueTask {
			w.reads.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			w.answer.Load().(func(http.ResponseWriter))(rw)
			return
		}
		b.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	addr := redfishAt(srv)
	now := time.Now()
	last := &v1alpha1.BMCPin{Address: addr, CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-time.Hour))}
	if !trusted {
		last = &v1alpha1.BMCPin{Address: "redfish+http://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "h1-bmc", PendingSince: last.PendingSince}
	}
	w.bmh = &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: addr, CredentialsName: "h1-bmc"}}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", LastBMC: last, PowerOnSent: &v1alpha1.PowerOnSent{Address: addr,
			At: stamp(now.Add(-time.Minute)), Until: stamp(now.Add(-30 * time.Second)), Task: overdueTask}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	w.c = crfake.NewClientBuilder().WithScheme(scheme).WithObjects(w.bmh, rec, secret).Build()
	w.p = &Powers{Client: w.c, Secrets: w.c, Namespace: "ns", StaleReads: time.Second, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = w.p.Close() })
	return w
}

// hold is the record's hold of h1 as a pass finds it (sentHold, then
// taskHold), from the record read afresh.
func (w *overdueWorld) hold(t *testing.T) (*v1alpha1.PowerOnSent, error) {
	t.Helper()
	var rec v1alpha1.RebootRecord
	require.NoError(t, w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
	return rec.Spec.PowerOnSent, w.p.taskHold(w.bmh, &rec, w.p.sentHold(&rec, "h1"))
}

// untilHold calls hold every 50 ms until ok says so or 10 s passed.
func (w *overdueWorld) untilHold(t *testing.T, ok func(error) bool) (*v1alpha1.PowerOnSent, error) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		s, err := w.hold(t)
		if ok(err) || time.Now().After(end) {
			return s, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTaskHoldReadsOverdueTask (review 39 round 16, point 3): a replica
// that finds a booking past its Until with a task and no Returned (its
// sender gone) reads that task's monitor itself, through the BMC the
// record trusts for the booking's address: while the task runs the host
// stays held (ErrTaskOverdue, which says the fix and that the monitor is
// read); once the monitor says the task ended, or that it is gone (404:
// read past Until), the booking is stamped Returned and the host is held
// StaleReads more, then released. A booking whose address the record
// trusts with no credentials is never read: held, with the fix.
func TestTaskHoldReadsOverdueTask(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(http.ResponseWriter)
	}{
		{"completed", func(rw http.ResponseWriter) { _, _ = rw.Write([]byte(`{"TaskState":"Completed"}`)) }},
		{"gone", func(rw http.ResponseWriter) { rw.WriteHeader(http.StatusNotFound) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newOverdueWorld(t, true)
			s, err := w.untilHold(t, func(err error) bool { return errors.Is(err, ErrTaskOverdue) && w.reads.Load() > 0 })
			require.ErrorIs(t, err, ErrTaskOverdue, "a running task holds the host for good: %v", err)
			assert.ErrorIs(t, err, ErrInFlight)
			assert.Contains(t, err.Error(), "powerOnSent", "says the fix")
			assert.Contains(t, err.Error(), "reads that task's monitor")
			assert.Empty(t, s.Returned)
			require.Positive(t, w.reads.Load(), "the monitor was read")

			w.answer.Store(c.end)
			w.p.mu.Lock()
			w.p.tasks["h1"].end = time.Now().Add(-overdueReread) // the next pass reads again
			w.p.mu.Unlock()
			var rec v1alpha1.RebootRecord
			_, err = w.untilHold(t, func(error) bool {
				require.NoError(t, w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
				return rec.Spec.PowerOnSent.Returned != ""
			})
			require.NotEmpty(t, rec.Spec.PowerOnSent.Returned, "the task read %s: the booking is stamped Returned (%v)", c.name, err)
			_, err = w.hold(t)
			assert.ErrorIs(t, err, ErrInFlight, "held StaleReads after the stamp")
			assert.NotErrorIs(t, err, ErrTaskOverdue)
			_, err = w.untilHold(t, func(err error) bool { return err == nil })
			assert.NoError(t, err, "released StaleReads after the stamp")
		})
	}
	t.Run("untrusted address", func(t *testing.T) {
		w := newOverdueWorld(t, false)
		_, err := w.hold(t)
		require.ErrorIs(t, err, ErrTaskOverdue)
		assert.Contains(t, err.Error(), "does not read that task")
		time.Sleep(300 * time.Millisecond)
		assert.Zero(t, w.reads.Load(), "no credentials go to an address the record does not trust")
	})
}

// TestTaskOverdueFromRecordTold (review 39 round 16, low): a host the
// record holds for good (Powers.Controller's ErrTaskOverdue, which comes
// back from the Reconciler as an error, not as Result.PowerErr) is
// reported with a PowerTaskOverdue event that says the fix, and read
// again within IdlePoll.
func TestTaskOverdueFromRecordTold(t *testing.T) {
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh).Build()
	overdue := fmt.Errorf("host h1: ... remove the record's wait: kubectl -n ns patch rebootrecord h1: %w (%w)", ErrTaskOverdue, ErrInFlight)
	rec := events.NewFakeRecorder(10)
	rc := &RebootController{Namespace: "ns", Client: c, Recorder: rec, IdlePoll: 3 * time.Second, Ownership: Ownership{NoOperator: true},
		Reconciler: &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: "ns"}, Now: time.Now,
			Power: func(string) (power.Controller, error) { return nil, overdue }}}
	res, err := rc.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "h1"}})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, res.RequeueAfter)
	evs := drainEvents(rec)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], "PowerTaskOverdue")
	assert.Contains(t, evs[0], "kubectl -n ns patch rebootrecord h1")
}

// patchFails is a client whose Patch of RebootRecords fails while fail is
// set (the API server unreachable for that write).
type patchFails struct {
	client.Client
	fail *atomic.Bool
}

func (c patchFails) Patch(ctx context.Context, obj client.Object, p client.Patch, o ...client.PatchOption) error {
	if _, ok := obj.(*v1alpha1.RebootRecord); ok && c.fail.Load() {
		return errors.New("review 39 round 16: the record write fails")
	}
	return c.Client.Patch(ctx, obj, p, o...)
}

// TestAsyncBooksBeforeSending (review 39 round 16, point 2): through
// Async and Powers.Controller, a power-on is written to the host's record
// (powerOnSent) before the BMC gets it, and removed once the BMC carried
// it out; a booking that cannot be written sends nothing (ErrNotSent: the
// BMC sees no reset), and neither does one the record shows another
// replica's booking still holding the host. Ground truth: the BMC's
// resets and the hardware.
func TestAsyncBooksBeforeSending(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	var c client.Client
	var bookedAtPost atomic.Value // *v1alpha1.PowerOnSent the record showed when the BMC got the reset
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
			var rec v1alpha1.RebootRecord
			if c.Get(r.Context(), types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec) == nil && rec.Spec.PowerOnSent != nil {
				bookedAtPost.Store(rec.Spec.PowerOnSent.DeepCopy())
			}
		}
		b.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: redfishAt(srv), CredentialsName: "h1-bmc"}}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", LastBMC: pinOf(bmh, stamp(time.Now().Add(-time.Hour)))}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	c = crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	fail := new(atomic.Bool)
	p := &Powers{WithoutAdmissionPolicy: true, Client: patchFails{Client: c, fail: fail}, Secrets: c, Namespace: "ns",
		StaleReads: 100 * time.Millisecond, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	a := &Async{Power: p.Controller, Wait: 10 * time.Second, TaskPoll: 50 * time.Millisecond}
	record := func() *v1alpha1.PowerOnSent {
		var r v1alpha1.RebootRecord
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &r))
		return r.Spec.PowerOnSent
	}

	fail.Store(true)
	pc, err := a.Controller("h1")
	require.NoError(t, err)
	err = pc.On(ctx)
	require.ErrorIs(t, err, power.ErrNotSent, "a booking that cannot be written sends nothing")
	assert.Empty(t, b.Resets(), "the BMC got no reset")
	assert.False(t, hw.WasOnAt(time.Now()))
	assert.Nil(t, record())

	fail.Store(false)
	pc, err = a.Controller("h1")
	require.NoError(t, err)
	require.NoError(t, pc.On(ctx))
	require.Equal(t, []string{"On"}, b.Resets())
	got, _ := bookedAtPost.Load().(*v1alpha1.PowerOnSent)
	require.NotNil(t, got, "the record showed the power-on booked when the BMC got it")
	assert.Equal(t, bmh.Spec.BMC.Address, got.Address)
	assert.Empty(t, got.Returned)
	assert.Nil(t, record(), "carried out (200/204): the booking is removed")

	// Another replica's booking still holds the host: nothing is sent.
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	var r v1alpha1.RebootRecord
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &r))
	r.Spec.PowerOnSent = &v1alpha1.PowerOnSent{Address: bmh.Spec.BMC.Address, At: stamp(time.Now()), Until: stamp(time.Now().Add(time.Minute))}
	require.NoError(t, c.Update(ctx, &r))
	pcs := booked{Controller: hw, p: p, host: "h1", address: bmh.Spec.BMC.Address}
	_, err = pcs.bookSend(ctx, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, power.ErrNotSent, "a booking the record shows holding the host is not overwritten")
	assert.ErrorIs(t, err, power.ErrBusy)
	assert.Equal(t, r.Spec.PowerOnSent.At, record().At)
}
