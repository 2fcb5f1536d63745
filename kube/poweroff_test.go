package kube

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestDisablePowerOffNeverPowersOff (issue 39, point 3): a host with
// spec.disablePowerOff (NC-SI: its BMC is unreachable while it is off) is
// never powered off, neither for a hard reboot request nor for
// spec.online false; the refusal is an event (PowerOffRefused). Ground
// truth: the emulated hardware never went off. On the old code the
// controller hard-powered it off at once.
func TestDisablePowerOffNeverPowersOff(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"))
	defer srv.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv)
		h.Spec.DisablePowerOff = true
	}))
	start := time.Now()

	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	defer powers.Close()
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	refused := func() {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, "PowerOffRefused") && strings.Contains(e, "h1") {
					return
				}
			case <-deadline:
				t.Fatal("no PowerOffRefused event")
			}
		}
	}
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
	}))
	refused()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
		h.Spec.Online = false
	}))
	refused()
	time.Sleep(time.Second)
	assert.False(t, hw.WasOffDuring(start, time.Now()), "ground truth: the host never went off: %v", hw.Truth())
}
