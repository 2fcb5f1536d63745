package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview39ac_StaleReturnedTaskReadEndedHeldForGood: sentHold and
// bookingReturned ignore a Returned stamped before the booking's At (an
// earlier booking's, or one stamped after the clock stepped back), so a
// booking with a Task and such a Returned is "not returned": past its
// Until it holds the host for good (ErrTaskOverdue) until taskHold reads
// the task ended and stamps it. But markReturnedAt writes the stamp only
// when s.Returned == "" ("recorded already: kept"): the Returned the
// hold ignores is never replaced, so the reading of a Completed task is
// never recorded ("could not be stamped") and the host is held off for
// good, rebootkit reading the monitor every overdueReread forever. The
// sender itself writes such a Returned when its clock steps back between
// markSent (At) and markReturned (its task read ended a moment later):
// NTP correcting a clock that ran ahead. Correct (doc.go, taskHold: once
// the monitor says the task ended the booking is stamped Returned and the
// hold ends StaleReads after that stamp): the host is released.
func TestReview39ac_StaleReturnedTaskReadEndedHeldForGood(t *testing.T) {
	w := newOverdueWorld(t, true)
	w.answer.Store(func(rw http.ResponseWriter) { _, _ = rw.Write([]byte(`{"TaskState":"Completed"}`)) })
	ctx := context.Background()
	var rec v1alpha1.RebootRecord
	require.NoError(t, w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
	at, err := time.Parse(time.RFC3339Nano, rec.Spec.PowerOnSent.At)
	require.NoError(t, err)
	// The sender stamped its task's end after its clock stepped back 2 s.
	rec.Spec.PowerOnSent.Returned = stamp(at.Add(-2 * time.Second))
	require.NoError(t, w.c.Update(ctx, &rec))
	_, err = w.hold(t)
	require.ErrorIs(t, err, ErrTaskOverdue, "premise: the booking's stale Returned is ignored; the host is held: %v", err)

	// Every pass reads the task again (the reading is made due at once,
	// as overdueReread would after its wait).
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		_, err = w.hold(t)
		if err == nil {
			break
		}
		w.p.mu.Lock()
		if r := w.p.tasks["h1"]; r != nil && r.finished() {
			r.end = time.Now().Add(-overdueReread)
		}
		w.p.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &rec))
	assert.NoError(t, err, "the task was read Completed %d time(s): the host is released StaleReads after the booking is "+
		"stamped, not held for good (powerOnSent %+v)", w.reads.Load(), rec.Spec.PowerOnSent)
}

// TestReview39ac_NilOwnershipPowersHostTakenBackBeforeAttempt: Powers
// with Ownership unset (a user who builds Powers, as the doc allows)
// falls back to "a host that was detached when the attempt began must
// still be". But Powers starts the attempt from its own (cached) read of
// the host, taken after the RebootController's ownership check: a host
// the operator took back between the two (the detached annotation gone,
// operationalStatus OK) is not detached when the attempt begins, so the
// fallback lets its On go to the BMC of a host the baremetal-operator
// powers. Ground truth: the BMC's reset log and the hardware. Correct
// (issue 39 point 1, doc.go "never two actors on one host"): no power-on
// of a host that is not detached, unless rebootkit owns it by its
// Ownership.
func TestReview39ac_NilOwnershipPowersHostTakenBackBeforeAttempt(t *testing.T) {
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
	require.True(t, func() bool { ok, _ := own.Ours(bmh); return ok }(), "premise: the RebootController's check finds the host rebootkit's (detached)")

	// The operator takes the host back right after that check, before
	// Powers reads the host.
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &h))
	delete(h.Annotations, metal3.DetachedAnnotation)
	h.Status.OperationalStatus = metal3.OperationalStatusOK
	require.NoError(t, c.Update(ctx, &h))
	ok, _ := own.Ours(&h)
	require.False(t, ok, "premise: the host is the operator's")

	_, err := p.Controller("h1")
	require.Error(t, err)
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
	assert.Empty(t, b.Resets(), "a power-on went to the BMC of a host the operator had taken back before the attempt began (%v)", err)
	assert.False(t, hw.WasOnAt(time.Now()), "the host the operator owns was powered on by rebootkit")
	_ = errors.Is
}
