package kube

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview39f_StalePinnedOffUsedWhileHostRuns (issue 39 round 6, against
// 740cfed's background pinned read, bmcpinread.go). A host's pending
// reboot is pinned to its real BMC A; the requests are gone and spec.bmc
// names another endpoint B (no admission policy in force), so checkPin
// reads A in the background. A is slow (400 ms, less than many real
// BMCs), so the pass gets ErrInFlight and the reading, Off at that
// instant, is kept "for the host's next pass" (pinnedReadFresh, 30 s).
// Then the host is powered on (out of band here: an operator, the BMC's
// power-restore policy; the controller itself through A after a restore
// of spec.bmc works the same, the kept reading is not tied to it). The
// next pass, a second later, takes the kept Off as "the pinned BMC reads
// Off": checkPin returns nil (B is used, B gets the credentials, no
// BMCChanged mark, and the pass drops the pin) although A's host has been
// running since. doc: "if it reads Off (the pending reboot may have
// powered the host off), the BMC is used to power the host back on";
// otherwise "the pin is dropped and the record marked BMCChanged".
// Ground truth: hw1.WasOnAt over the whole span since the power-on.
func TestReview39f_StalePinnedOffUsedWhileHostRuns(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	var slow atomic.Bool
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpState && slow.Load() {
			time.Sleep(400 * time.Millisecond)
		}
		return fake.Fault{}
	}})
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
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	pin := &v1alpha1.BMCPin{Address: redfishAt(srv1), CredentialsName: bmh.Spec.BMC.CredentialsName,
		PendingSince: time.Now().UTC().Format(time.RFC3339Nano)}
	require.NoError(t, admin.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin}}))
	// The pending reboot powered the host off; the requests are gone and
	// spec.bmc names B.
	require.NoError(t, hw1.Off(ctx, power.ModeHard))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	p := &Powers{Client: admin, Secrets: admin, Namespace: ns, PolicyName: "not-installed-" + ns, PolicySettle: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 3 * time.Second, ConnectTimeout: 3 * time.Second})}
	defer func() { _ = p.Close() }()
	slow.Store(true)
	err := p.checkPin(ctx, &bmh)
	require.ErrorIs(t, err, ErrInFlight, "the slow pinned read should be left running")
	time.Sleep(1500 * time.Millisecond) // the reading ends: Off
	slow.Store(false)
	// The host is powered on (through A, out of band) and runs.
	hw1.OutOfBandOn()
	on := time.Now()
	time.Sleep(time.Second)
	require.True(t, hw1.WasOnAt(on.Add(100*time.Millisecond)), "setup: hw1 should be running")
	err = p.checkPin(ctx, &bmh)
	now := time.Now()
	t.Logf("checkPin a second after the power-on: %v", err)
	runs := !hw1.WasOffDuring(on.Add(100*time.Millisecond), now)
	require.True(t, runs, "setup: hw1 ran throughout")
	require.False(t, err == nil, "checkPin took the pinned BMC's reading as Off (B is used, its credentials sent, no BMCChanged mark, "+
		"the pin dropped) while the host had been running for a second: the reading was kept from before the power-on (bmcpinread.go, pinnedReadFresh)")
	require.True(t, errors.Is(err, ErrBMCChanged) || errors.Is(err, ErrInFlight), "got %v", err)
}
