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
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// TestAsyncOverdueClearedOnceTaskReadEnded (review 39 round 17, Low): a
// host whose command's task Async followed past TaskLimit is refused
// (ErrTaskOverdue) while its record shows that booking unended, and no
// longer once the booking is stamped Returned (its task read ended, by
// any replica); an overdue task no booking records stays until restart.
// A deleted host's entries go (forgetHost), but a lost answer's end.
func TestAsyncOverdueClearedOnceTaskReadEnded(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	at := stamp(now.Add(-time.Hour))
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: "uid-1"}}
	rec := &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: "uid-1", PowerOnSent: &v1alpha1.PowerOnSent{Address: "redfish://bmc",
			At: at, Until: stamp(now.Add(-50 * time.Minute)), Task: "/redfish/v1/TaskService/Tasks/3"}}}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(bmh, rec).Build()
	p := &Powers{Client: c, Secrets: c, Namespace: "ns", Timeout: 5 * time.Second}
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	a := &Async{Power: func(string) (power.Controller, error) {
		return booked{Controller: hw, p: p, host: "h1", address: "redfish://bmc"}, nil
	}}
	a.overdue = map[string]overdueCall{"h1": {at: at, why: "task 3 overdue"}, "h2": {why: "no booking"}}
	pc, err := a.Controller("h1")
	require.NoError(t, err)
	_, err = pc.State(ctx)
	require.ErrorIs(t, err, ErrTaskOverdue, "the record shows the booking unended")

	var r v1alpha1.RebootRecord
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h1"}, &r))
	r.Spec.PowerOnSent.Returned = stamp(now.Add(-time.Minute))
	require.NoError(t, c.Update(ctx, &r))
	_, err = pc.State(ctx)
	require.NoError(t, err, "its task was read ended (stamped Returned): the host is no longer refused")
	a.mu.Lock()
	_, kept := a.overdue["h1"]
	a.mu.Unlock()
	assert.False(t, kept)

	pc2, err := a.Controller("h2")
	require.NoError(t, err)
	_, err = pc2.State(ctx)
	assert.ErrorIs(t, err, ErrTaskOverdue, "no booking records it: kept")

	a.mu.Lock()
	a.ended["h3"] = callEnd{at: now}
	a.ended["h4"] = callEnd{at: now, lost: true}
	a.mu.Unlock()
	a.forgetHost("h1")
	a.forgetHost("h3")
	a.forgetHost("h4")
	a.mu.Lock()
	defer a.mu.Unlock()
	assert.NotContains(t, a.ended, "h1")
	assert.NotContains(t, a.ended, "h3")
	assert.Contains(t, a.ended, "h4", "a lost answer may still land on a host created again under that name")
}
