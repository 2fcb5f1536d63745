package kube

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestBMCChangedMarkNeedsAdmin (issue 39, point 2, review round 4): a pin
// whose requests are gone with spec.bmc changed (no admission policy)
// is dropped with no call to the new BMC and the record marked
// BMCChanged; the mark refuses the new BMC on every pass until spec.bmc
// is restored (which clears it) or an identity that may write
// RebootRecords removes it; when the pinned BMC reads Off the host is
// powered back on through the pinned BMC and marked all the same. Ground truth: the calls each
// fake BMC received; the record read directly.
func TestBMCChangedMarkNeedsAdmin(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	defer srv2.Close()
	newBMH(t, admin, ns, "h1")
	require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	var bmh metal3.BareMetalHost
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &bmh))
	pin := &v1alpha1.BMCPin{Address: redfishAt(srv1), CredentialsName: bmh.Spec.BMC.CredentialsName, PendingSince: stamp(time.Now())}
	require.NoError(t, admin.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin}}))
	p := &Powers{WithoutAdmissionPolicy: true, Client: admin, Secrets: admin, Namespace: ns, Timeout: 5 * time.Second, PolicyName: "not-installed-" + ns, PolicySettle: time.Second,
		StaleReads: 200 * time.Millisecond, // the fake BMCs read fresh
		Pool:       power.NewPool(power.PoolConfig{CallTimeout: time.Second, ConnectTimeout: time.Second})}
	defer func() { _ = p.Close() }()
	record := func() v1alpha1.RebootRecord {
		var r v1alpha1.RebootRecord
		require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r))
		return r
	}
	repin := func() {
		r := record()
		r.Spec.BMC, r.Spec.BMCChanged = pin, nil
		require.NoError(t, admin.Update(ctx, &r))
	}
	use := func() error {
		pc, err := p.Controller("h1")
		if err != nil {
			return err
		}
		_, err = pc.State(ctx)
		return err
	}

	// The requests gone with the BMC redirected; the pinned BMC reads On.
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	for range 3 {
		require.ErrorIs(t, use(), ErrBMCChanged)
	}
	r := record()
	assert.Nil(t, r.Spec.BMC, "the pin of the withdrawn reboot is dropped")
	require.NotNil(t, r.Spec.BMCChanged, "the record is marked")
	assert.Equal(t, redfishAt(srv1), r.Spec.BMCChanged.Address)
	assert.Empty(t, hw2.Calls(), "no call (no credentials) to the new BMC while marked")

	// Restoring spec.bmc lifts and clears the mark.
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	require.NoError(t, use())
	assert.Nil(t, record().Spec.BMCChanged, "restored: the mark goes")

	// Marked again; an administrator removes the mark: the new BMC is used.
	repin()
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	require.ErrorIs(t, use(), ErrBMCChanged)
	require.Empty(t, hw2.Calls())
	r = record()
	require.NotNil(t, r.Spec.BMCChanged)
	// (Since issue 39 round 8 the record keeps the host's last BMC, so
	// removing the mark no longer accepts the new BMC: the next pass
	// marks again; the administrator names the new BMC in the mark.)
	require.NoError(t, admin.Patch(ctx, &r, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/bmcChanged"}]`))))
	require.ErrorIs(t, use(), ErrBMCChanged, "a removed mark is no acceptance")
	require.Empty(t, hw2.Calls())
	acceptBMC(t, ctx, admin, ns, "h1", 5*time.Second)
	require.NoError(t, use(), "accepted by an administrator")
	assert.NotEmpty(t, hw2.Calls(), "the accepted BMC is used")

	// The pinned BMC reads Off: the host is powered back on through the
	// pinned BMC, never through the new one, and the record is marked
	// (issue 39 round 9: before, it was released through the new BMC,
	// unmarked, which a reboot client could trigger with a hold of its
	// own).
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	repin()
	hw1.OutOfBandOff()
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	calls2 := len(hw2.Calls())
	// An Off counts StaleReads after the pass that found the requests
	// gone (the evidence rule); until then the pass is requeued.
	err := use()
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, ErrInFlight) && time.Now().Before(deadline); err = use() {
		time.Sleep(20 * time.Millisecond)
	}
	require.ErrorIs(t, err, ErrBMCChanged, "the new BMC is not used until accepted")
	assert.Eventually(t, func() bool { return hw1.WasOnAt(time.Now()) }, 5*time.Second, 20*time.Millisecond,
		"a host the withdrawn reboot may have left off is powered back on through its pinned BMC")
	assert.Len(t, hw2.Calls(), calls2, "no call to the new BMC")
	require.NotNil(t, record().Spec.BMCChanged, "marked until the new BMC is accepted")
	assert.Equal(t, redfishAt(srv1), record().Spec.BMCChanged.Address)
}
