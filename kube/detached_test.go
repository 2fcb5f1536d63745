package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestOwnOnlyWhenOperatorDetached (issue 39, point 1): next to a
// baremetal-operator, a host with the detached annotation is rebootkit's
// only once the operator reports status.operationalStatus detached: while
// it is provisioning (a state the operator does not detach in) or before
// its detach completes, a reboot request gets RebootRefused and no power
// call (ground truth: the fake hardware's log); once detached, it is
// served. On the old code the annotation alone made rebootkit power it,
// behind Ironic.
func TestOwnOnlyWhenOperatorDetached(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, metal3.DetachedAnnotation, "")
	}))
	setStatus(t, direct, ns, "h1", func(s *metal3.BareMetalHostStatus) {
		s.Provisioning.State = metal3.StateProvisioning
		s.OperationalStatus = metal3.OperationalStatusOK
	})
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	log := &actors{}
	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power: func(name string) (power.Controller, error) {
			return tagged{Controller: hw, host: name, actor: "rebootkit", log: log}, nil
		},
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
	}))
	waitEvent := func(reason, text string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, reason) && strings.Contains(e, text) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s event saying %q", reason, text)
			}
		}
	}
	// Provisioning: the operator does not detach in that state.
	waitEvent("RebootRefused", "has not detached it yet")
	// Provisioned, annotation there, detach not yet done.
	setStatus(t, direct, ns, "h1", func(s *metal3.BareMetalHostStatus) { s.Provisioning.State = metal3.StateProvisioned })
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "poke", "1") // a pass now
	}))
	time.Sleep(2 * time.Second) // the pass of the poke (refused again, reported once)
	assert.Empty(t, log.of("h1"), "no power call while the operator owns the host")
	assert.True(t, hw.HardwareOn(), "ground truth: the host was never powered off")

	// The operator reports the detach: rebootkit serves the request
	// (on the status change alone).
	setStatus(t, direct, ns, "h1", func(s *metal3.BareMetalHostStatus) { s.OperationalStatus = metal3.OperationalStatusDetached })
	deadline := time.Now().Add(30 * time.Second)
	for hw.HardwareOn() {
		require.True(t, time.Now().Before(deadline), "the detached host was not powered off")
		time.Sleep(50 * time.Millisecond)
	}
}
