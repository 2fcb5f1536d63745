package kube

import (
	"context"
	"strconv"
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

// startReboot runs a RebootController as the controller's role on ns
// with the fake hardware hws, and returns its event recorder.
func startReboot(t *testing.T, ns string, own Ownership, idle time.Duration, hws map[string]*fake.Power) *events.FakeRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power:  func(name string) (power.Controller, error) { return hws[name], nil },
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		Ownership: own, IdlePoll: idle}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rec
}

// TestIdleHostCrashNoticed (issue 39, point 8): a detached host with no
// request that crashes off (spec.online true) is powered on again within
// the idle poll, as the baremetal-operator would within its 60 s poll.
// On the old code nothing reconciled it until the manager's 10 h resync.
func TestIdleHostCrashNoticed(t *testing.T) {
	needAPIServer(t)
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	detach(t, direct, ns, "h1")
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	startReboot(t, ns, Ownership{}, 2*time.Second, map[string]*fake.Power{"h1": hw})
	time.Sleep(2 * time.Second) // the first passes are over
	crashed := time.Now()
	hw.OutOfBandOff()
	deadline := time.Now().Add(20 * time.Second)
	for !hw.HardwareOn() {
		require.True(t, time.Now().Before(deadline), "the crashed host was not noticed (off since %v)", crashed)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRebootRefusedOnce (issue 39, point 8): a managed host's request is
// refused with one RebootRefused event, not one per change of the host's
// annotations (the operator's and the remediation's own writes); a new
// request is refused anew. On the old code every annotation change gave
// another event.
func TestRebootRefusedOnce(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	rec := startReboot(t, ns, Ownership{}, time.Minute, map[string]*fake.Power{"h1": hw})
	count := func(wait time.Duration) int {
		n := 0
		deadline := time.After(wait)
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, "RebootRefused") {
					n++
				}
			case <-deadline:
				return n
			}
		}
	}
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"a", `{"mode":"hard"}`)
	}))
	for i := range 5 {
		require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
			metav1.SetMetaDataAnnotation(&h.ObjectMeta, "other.io/n", strconv.Itoa(i))
		}))
		time.Sleep(200 * time.Millisecond)
	}
	assert.Equal(t, 1, count(3*time.Second), "one event for one request")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"b", `{"mode":"hard"}`)
	}))
	assert.Equal(t, 1, count(3*time.Second), "a new request is refused anew")
	assert.True(t, hw.HardwareOn())
	assert.Empty(t, hw.Calls(), "no power call on the operator's host")
}
