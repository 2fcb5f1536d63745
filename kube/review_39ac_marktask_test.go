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
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// taskPatchFails39ac fails every RebootRecord patch that writes a task
// (markTask's rebookTask) while fail is set: one API write lost.
type taskPatchFails39ac struct {
	client.Client
	fail  *atomic.Bool
	fails *atomic.Int32
}

func (c taskPatchFails39ac) Patch(ctx context.Context, obj client.Object, p client.Patch, o ...client.PatchOption) error {
	if _, ok := obj.(*v1alpha1.RebootRecord); ok && c.fail.Load() {
		if d, err := p.Data(obj); err == nil && bytes.Contains(d, []byte(`"task":"`)) {
			c.fails.Add(1)
			return errors.New("review 39ac: the record write fails")
		}
	}
	return c.Client.Patch(ctx, obj, p, o...)
}

// TestReview39ac_PinnedOnOverdueTaskUnbookedNeverRetried: markTask (the
// record's Task of a pinned On the BMC accepted for later) is best effort;
// when that one write fails, the record's booking shows the sending (At,
// Until = deadline + TaskLimit) with no Task. The attempt follows the
// task past TaskLimit (ErrTaskOverdue), and pinnedPowerOn then keeps that
// error while bookingUnended(rec, o.sentAt): "it is left as it is until
// that task is read ended (rebootkit reads its monitor)". But nothing
// reads it: taskHold reads a task only for a booking with a Task, and
// sentHold lets the booking go at Until + StaleReads without a Returned.
// So the booking stays "unended" for good and, after the task did end
// (Exception: the host is still off), the owed power-on is never retried
// by this process: the host stays off for good (until a restart or an
// administrator's patch). Ground truth: the hardware. Correct (doc.go:
// "An attempt whose task is overdue is retried once ... its task read
// ended"): the host is powered on once the task ended and the record's
// wait is over.
func TestReview39ac_PinnedOnOverdueTaskUnbookedNeverRetried(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	const monitor = "/redfish/v1/TaskService/Tasks/39ac"
	var queuedOnce, ended atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") == monitor {
			w.Header().Set("Content-Type", "application/json")
			if ended.Load() {
				_, _ = w.Write([]byte(`{"@odata.id":"` + monitor + `","TaskState":"Exception"}`))
				return
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"@odata.id":"` + monitor + `","TaskState":"Running"}`))
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) && queuedOnce.CompareAndSwap(false, true) {
				w.Header().Set("Location", monitor)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"@odata.id":"` + monitor + `","TaskState":"Running"}`))
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	now := time.Now()
	pin := v1alpha1.BMCPin{Address: redfishAt(srv), CredentialsName: "h1-bmc", PendingSince: stamp(now.Add(-time.Hour))}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://10.9.9.9/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", BMCChanged: &pin, PowerOnThrough: &pin}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}
	base := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec, secret).Build()
	fail, fails := new(atomic.Bool), new(atomic.Int32)
	fail.Store(true)
	c := taskPatchFails39ac{Client: base, fail: fail, fails: fails}
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", StaleReads: 200 * time.Millisecond,
		Timeout: 5 * time.Second, TaskLimit: time.Second, Ownership: &Ownership{NoOperator: true},
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	key := types.NamespacedName{Namespace: "ns", Name: "h1"}

	overdue := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		o := p.pinOn["h1"]
		return o != nil && o.finishedOn() && errors.Is(o.err, ErrTaskOverdue)
	}
	var err error
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) && !overdue() {
		_, err = p.Controller("h1")
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, overdue(), "premise: the queued On's task is followed past TaskLimit (%v)", err)
	require.Positive(t, fails.Load(), "premise: markTask's write failed")
	fail.Store(false) // the API server is fine again
	var r v1alpha1.RebootRecord
	require.NoError(t, base.Get(ctx, key, &r))
	require.NotNil(t, r.Spec.PowerOnSent)
	require.Empty(t, r.Spec.PowerOnSent.Task, "premise: the record's booking names no task")
	ended.Store(true) // the task ended (Exception): the host is still off, its power-on still owed
	until, perr := time.Parse(time.RFC3339Nano, r.Spec.PowerOnSent.Until)
	require.NoError(t, perr)
	t.Logf("booking %+v: its wait ends in %v", r.Spec.PowerOnSent, time.Until(until))

	// Every pass from then on, until the record's wait is over and well past.
	end = until.Add(p.StaleReads + 10*time.Second)
	for time.Now().Before(end) && !hw.WasOnAt(time.Now()) {
		_, err = p.Controller("h1")
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, base.Get(ctx, key, &r))
	assert.True(t, hw.WasOnAt(time.Now()), "the owed power-on is retried once the task ended and the record's wait is over "+
		"(10 s after it): the host stays off for good (last pass: %v; powerOnSent %+v; resets %v)", err, r.Spec.PowerOnSent, b.Resets())
}
