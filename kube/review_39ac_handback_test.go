package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// slowOff39ac is a BMC whose power-off first logs in again (its session
// expired), which takes delay, as a slow or half-dead BMC's login does (up
// to the pool's CallTimeout); offCalled gets the instant the call began.
type slowOff39ac struct {
	power.Controller
	delay     time.Duration
	offCalled chan time.Time
}

func (s slowOff39ac) Off(ctx context.Context, m power.Mode) error {
	select {
	case s.offCalled <- time.Now():
	default:
	}
	time.Sleep(s.delay)
	return s.Controller.Off(ctx, m)
}

// TestReview39ac_NormalPathOffSentAfterOperatorTookHostBack: doc.go
// ("The baremetal-operator's rules"): "A host stops being rebootkit's the
// moment its annotation goes", and Ownership: "never two actors on one
// host". The RebootController checks ownership once, at the start of a
// pass, from the host it read then; the normal path's power command goes
// out after the BMC's first answers (its login and state read, each of
// which a slow BMC may take up to the pool's CallTimeout), and nothing
// reads the host again before it. The pinned path's power-on was given
// exactly that check (stillOurs, "right before a pinned On":
// TestReview39ab_PinnedOnSentAfterOperatorTookHostBack); the normal
// path's hard power-off was not. Here a detached host gets a hard hold;
// its BMC takes 3 s to log in again inside the power-off call (its
// session expired); 0.5 s into that call the detached annotation
// goes (the operator takes the host back and powers it by spec.online).
// Ground truth: the hardware is powered off 2.5 s after the host stopped
// being rebootkit's. Correct: no power command of rebootkit reaches the
// BMC of a host that is not rebootkit's when the command is sent (its
// ownership checked after the BMC's last answer before it, as the pinned
// On's is).
func TestReview39ac_NormalPathOffSentAfterOperatorTookHostBack(t *testing.T) {
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.True(t, hw.HardwareOn())
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1",
		Annotations: map[string]string{metal3.DetachedAnnotation: "", reboot.AnnotationPrefix + "fencer": `{"mode":"hard"}`}},
		Spec: metal3.BareMetalHostSpec{Online: true},
		Status: metal3.BareMetalHostStatus{OperationalStatus: metal3.OperationalStatusDetached,
			Provisioning: metal3.ProvisionStatus{State: metal3.StateProvisioned}}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh).WithStatusSubresource(&metal3.BareMetalHost{}).Build()
	offCalled := make(chan time.Time, 1)
	rc := &RebootController{Namespace: "ns", Client: c, Recorder: events.NewFakeRecorder(100), Ownership: Ownership{},
		Reconciler: &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: "ns"}, Now: time.Now,
			Config: reboot.Config{StaleReads: 100 * time.Millisecond, SoftTimeout: time.Second},
			Power: func(string) (power.Controller, error) {
				return slowOff39ac{Controller: hw, delay: 3 * time.Second, offCalled: offCalled}, nil
			}}}
	ok, _ := rc.Ownership.Ours(bmh)
	require.True(t, ok, "premise: the host is rebootkit's (detached)")

	released := make(chan time.Time, 1)
	go func() {
		<-offCalled
		time.Sleep(500 * time.Millisecond)
		var h metal3.BareMetalHost
		if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &h); err == nil {
			delete(h.Annotations, metal3.DetachedAnnotation)
			_ = c.Update(ctx, &h)
		}
		released <- time.Now()
	}()
	var err error
	for i := 0; i < 20 && len(released) == 0; i++ {
		_, err = rc.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "h1"}})
		time.Sleep(150 * time.Millisecond)
	}
	require.Len(t, released, 1, "premise: a pass sends the hard power-off (%v)", err)
	at := <-released
	t.Logf("pass: %v; transitions %+v; on %v", err, hw.Transitions(), hw.HardwareOn())
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &h))
	ok, _ = rc.Ownership.Ours(&h)
	require.False(t, ok, "premise: the host is the operator's from %s on", at.Format(time.StampMilli))
	assert.False(t, hw.WasOffDuring(at, time.Now()),
		"rebootkit powered off a host %s after the operator took it back (pass error %v; transitions %+v)",
		func() time.Duration {
			for _, tr := range hw.Transitions() {
				if tr.At.After(at) {
					return tr.At.Sub(at).Round(100 * time.Millisecond)
				}
			}
			return 0
		}(), err, hw.Transitions())
}
