package kube

import (
	"context"
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
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview39ad_PinnedOnSentAfterTakeBackDuringRelogin (issue 39 point 1;
// doc.go "The baremetal-operator's rules": "A host stops being rebootkit's
// the moment its annotation goes"; ownerwatch.go: a power command "is not
// sent once that is read ..., whatever the path"). Round 18 put every
// power command of a pass and of Async's calls under the ownership watch
// (TestReview39ac_NormalPathOffSentAfterOperatorTookHostBack: the command
// goes out after a slow re-login, after the operator took the host back).
// The pinned power-on (Powers.runPinnedOn) runs under Powers' own context
// (readCtx), which carries no ownership check: its only check is
// stillOurs/stillOwed, read once, before the On's request. Here the BMC's
// session has expired: the On's POST is answered 401, the client logs in
// again (a slow BMC: 3 s) and posts the On again. 0.5 s into that login
// the detached annotation goes (the operator takes the host back and
// powers it by spec.online). Ground truth (the emulator's reset log and
// the hardware): rebootkit's On reaches the BMC about 2.5 s after the host
// stopped being rebootkit's: two actors on one host.
func TestReview39ad_PinnedOnSentAfterTakeBackDuringRelogin(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(ctx, power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	var expired atomic.Bool // the first reset's session has expired
	reloginStarted := make(chan struct{}, 1)
	var resetRefused atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "ComputerSystem.Reset") && !expired.Load() {
			expired.Store(true)
			resetRefused.Store(true)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.NoValidSession","message":"session expired"}}`))
			return
		}
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "SessionService/Sessions") && resetRefused.Load() {
			select {
			case reloginStarted <- struct{}{}:
			default:
			}
			time.Sleep(3 * time.Second) // a slow BMC's login
		}
		b.ServeHTTP(w, r)
	}))
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
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", StaleReads: 500 * time.Millisecond, Timeout: 10 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 8 * time.Second, ConnectTimeout: 5 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	own := Ownership{}
	require.True(t, func() bool { ok, _ := own.Ours(bmh); return ok }(), "premise: the host is rebootkit's (detached)")

	// The pass of a host of rebootkit's: the owed power-on's attempt starts.
	_, err := p.Controller("h1")
	require.ErrorIs(t, err, ErrBMCChanged)

	// The operator takes the host back 0.5 s into the On's re-login.
	var released time.Time
	select {
	case <-reloginStarted:
	case <-time.After(10 * time.Second):
		t.Fatalf("premise: the On was not refused 401 and retried after a re-login (resets %v)", b.Resets())
	}
	time.Sleep(500 * time.Millisecond)
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &h))
	delete(h.Annotations, metal3.DetachedAnnotation)
	h.Status.OperationalStatus = metal3.OperationalStatusOK
	require.NoError(t, c.Update(ctx, &h))
	released = time.Now()
	ok, _ := own.Ours(&h)
	require.False(t, ok, "premise: the host is no longer rebootkit's")

	end := time.Now().Add(10 * time.Second)
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
	var landed time.Duration
	for _, tr := range hw.Transitions() {
		if tr.At.After(released) {
			landed = tr.At.Sub(released).Round(100 * time.Millisecond)
			break
		}
	}
	assert.Empty(t, b.Resets(), "a power-on reached the BMC %v after the operator took the host back (transitions %+v)", landed, hw.Transitions())
	assert.False(t, hw.WasOnAt(time.Now()), "the host the operator owns was powered on by rebootkit")
}
