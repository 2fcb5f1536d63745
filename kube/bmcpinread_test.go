package kube

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// pinnedReadRig is a host whose pinned BMC (a Redfish emulator whose
// State calls take delay) reads Off, with Powers on a fake client.
func pinnedReadRig(t *testing.T, delay time.Duration) (*Powers, *metal3.BareMetalHost, *v1alpha1.BMCPin, *atomic.Int32) {
	t.Helper()
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpState {
			time.Sleep(delay)
		}
		return fake.Fault{}
	}})
	require.NoError(t, hw.Off(context.Background(), power.ModeHard))
	srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"))
	t.Cleanup(srv.Close)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
	require.NoError(t, c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1-bmc",
		Labels: map[string]string{BMCHostLabel: "h1"}}, Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h1", UID: types.UID("uid-h1")},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
			CredentialsName: "h1-bmc"}}}
	pin := &v1alpha1.BMCPin{Address: "redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}
	var done atomic.Int32
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", Done: func(string) { done.Add(1) },
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 10 * time.Second, ConnectTimeout: 10 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	return p, bmh, pin, &done
}

// waitPinned waits for host h1's kept reading to end.
func waitPinned(t *testing.T, p *Powers, within time.Duration) {
	t.Helper()
	p.mu.Lock()
	r := p.pinned["h1"]
	p.mu.Unlock()
	require.NotNil(t, r, "a reading is kept")
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("the pinned reading did not end within %s", within)
	}
}

// TestPinnedReadLateOffFreshUsed: an Off that ends after its pass stopped
// waiting is used by the next pass while the reading began at most
// pinnedReadOffFresh ago, and its end calls Powers.Done (the host is
// requeued then).
func TestPinnedReadLateOffFreshUsed(t *testing.T) {
	p, bmh, pin, done := pinnedReadRig(t, 400*time.Millisecond)
	_, err := p.pinnedReadsOff(bmh, pin, time.Time{})
	require.ErrorIs(t, err, ErrInFlight)
	waitPinned(t, p, 5*time.Second)
	require.Eventually(t, func() bool { return done.Load() == 1 }, time.Second, 10*time.Millisecond, "Done is told at the reading's end")
	off, err := p.pinnedReadsOff(bmh, pin, time.Time{})
	require.NoError(t, err)
	require.True(t, off)
}

// TestPinnedReadLateOffReadAgainOnce: an Off whose reading began more than
// pinnedReadOffFresh before the pass that would use it is never acted on:
// one fresh reading is started, and when its Off comes too late as well
// the pinned BMC is taken for not reading Off (checkPin marks the record,
// the safe direction) instead of reading forever.
func TestPinnedReadLateOffReadAgainOnce(t *testing.T) {
	p, bmh, pin, _ := pinnedReadRig(t, pinnedReadOffFresh+500*time.Millisecond)
	_, err := p.pinnedReadsOff(bmh, pin, time.Time{})
	require.ErrorIs(t, err, ErrInFlight)
	waitPinned(t, p, 10*time.Second)
	off, err := p.pinnedReadsOff(bmh, pin, time.Time{})
	require.ErrorIs(t, err, ErrInFlight, "a too old Off starts a fresh reading")
	require.False(t, off)
	waitPinned(t, p, 10*time.Second)
	off, err = p.pinnedReadsOff(bmh, pin, time.Time{})
	require.NoError(t, err)
	require.False(t, off, "a second too late Off is not acted on")
	p.mu.Lock()
	_, kept := p.pinned["h1"]
	p.mu.Unlock()
	require.False(t, kept)
}

// TestPinnedReadCancelledByClose: Powers.Close ends a running pinned
// reading (it is not left to the pool's timeouts).
func TestPinnedReadCancelledByClose(t *testing.T) {
	p, bmh, pin, _ := pinnedReadRig(t, 3*time.Second)
	_, err := p.pinnedReadsOff(bmh, pin, time.Time{})
	require.ErrorIs(t, err, ErrInFlight)
	p.mu.Lock()
	r := p.pinned["h1"]
	p.mu.Unlock()
	start := time.Now()
	require.NoError(t, p.Close())
	select {
	case <-r.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the pinned reading outlived Close")
	}
	require.False(t, r.off)
	t.Logf("ended %s after Close", time.Since(start))
}

// TestPinnedReadOffCountsOnlyStaleReadsAfter: the pinned BMC's Off counts
// only by the reboot package's evidence rule: a reading begun before
// notBefore (StaleReads after the pass that first found the requests
// gone, and after the last power command the record shows) is kept and
// never acted on, no reading is started again before notBefore, and the
// first pass from then on reads again and acts on that reading.
func TestPinnedReadOffCountsOnlyStaleReadsAfter(t *testing.T) {
	p, bmh, pin, _ := pinnedReadRig(t, 0)
	p.StaleReads = 300 * time.Millisecond
	since := time.Now().Add(-time.Hour)
	pin.PendingSince = stamp(since)
	rec := &v1alpha1.RebootRecord{Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin}}
	first := time.Now()
	notBefore := p.pinnedNotBefore("h1", pin, lastPowerCommand(rec, bmh, since))
	require.False(t, notBefore.Before(first.Add(p.StaleReads)), "StaleReads after the pass that first found the requests gone")
	require.Equal(t, notBefore, p.pinnedNotBefore("h1", pin, since), "the first finding is kept")
	later := time.Now().Add(time.Second)
	require.False(t, p.pinnedNotBefore("h1", pin, later).Before(later.Add(p.StaleReads)), "and StaleReads after the last power command")

	off, err := p.pinnedReadsOff(bmh, pin, notBefore)
	require.ErrorIs(t, err, ErrInFlight, "an Off read before notBefore does not count")
	require.False(t, off)
	p.mu.Lock()
	r := p.pinned["h1"]
	p.mu.Unlock()
	require.NotNil(t, r)
	if time.Now().Before(notBefore) {
		_, err = p.pinnedReadsOff(bmh, pin, notBefore)
		require.ErrorIs(t, err, ErrInFlight)
		p.mu.Lock()
		require.Same(t, r, p.pinned["h1"], "no reading is started again before notBefore")
		p.mu.Unlock()
	}
	time.Sleep(time.Until(notBefore))
	off, err = p.pinnedReadsOff(bmh, pin, notBefore)
	require.NoError(t, err)
	require.True(t, off, "a reading begun from notBefore on counts")
	p.mu.Lock()
	_, kept := p.seen["h1"]
	p.mu.Unlock()
	require.False(t, kept, "the wait is used once")

	// A power command the record shows moves notBefore.
	st, _ := json.Marshal(reboot.Status{LastPoweredOn: later})
	rec.Spec.Status = string(st)
	require.True(t, later.Equal(lastPowerCommand(rec, bmh, since)))
}
