package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// actors records who made power calls on which host.
type actors struct {
	mu sync.Mutex
	by map[string]map[string]int
}

func (a *actors) note(host, actor string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[string]map[string]int{}
	}
	if a.by[host] == nil {
		a.by[host] = map[string]int{}
	}
	a.by[host][actor]++
}

func (a *actors) of(host string) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.by[host] {
		out[k] = v
	}
	return out
}

// tagged records the power calls of one actor.
type tagged struct {
	power.Controller
	host, actor string
	log         *actors
}

func (t tagged) On(ctx context.Context) error {
	t.log.note(t.host, t.actor)
	return t.Controller.On(ctx)
}

func (t tagged) Off(ctx context.Context, m power.Mode) error {
	t.log.note(t.host, t.actor)
	return t.Controller.Off(ctx, m)
}

// operatorStandIn plays the baremetal-operator's power loop for the hosts
// it manages (not detached): any reboot.metal3.io annotation powers the
// host off (the bare one is removed once it is off), otherwise power
// follows spec.online; status.poweredOn and lastUpdated are written as
// the operator writes them.
func operatorStandIn(ctx context.Context, t *testing.T, c client.Client, ns string, hws map[string]*fake.Power, log *actors) {
	written := map[string]time.Time{}
	for ctx.Err() == nil {
		var hosts metal3.BareMetalHostList
		if err := c.List(ctx, &hosts, client.InNamespace(ns)); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for i := range hosts.Items {
			h := &hosts.Items[i]
			hw := hws[h.Name]
			if hw == nil {
				continue
			}
			// checkDetachedHost: the annotation detaches a host in a
			// detachable state (the stand-in's Ironic detaches at once),
			// and the operator then leaves it alone.
			if _, asked := h.Annotations[metal3.DetachedAnnotation]; asked && detachable(h.Status.Provisioning.State) {
				if h.Status.OperationalStatus != metal3.OperationalStatusDetached {
					h.Status.OperationalStatus = metal3.OperationalStatusDetached
					_ = c.Status().Update(ctx, h)
				}
				continue
			}
			pc := tagged{Controller: hw, host: h.Name, actor: "baremetal-operator", log: log}
			wantOff, bare := !h.Spec.Online, false
			for k := range h.Annotations {
				if k == reboot.Annotation {
					bare = true
				}
				if k == reboot.Annotation || strings.HasPrefix(k, reboot.AnnotationPrefix) {
					wantOff = true
				}
			}
			on := hw.HardwareOn()
			switch {
			case wantOff && on:
				_ = pc.Off(ctx, power.ModeHard)
			case bare && !on:
				patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+reboot.Annotation+`":null}}}`))
				_ = c.Patch(ctx, h, patch)
			case !wantOff && !on:
				_ = pc.On(ctx)
			}
			on = hw.HardwareOn()
			if h.Status.PoweredOn != on || time.Since(written[h.Name]) > time.Second {
				h.Status.PoweredOn = on
				h.Status.OperationalStatus = metal3.OperationalStatusOK
				now := metav1.Now()
				h.Status.LastUpdated = &now
				if err := c.Status().Update(ctx, h); err == nil {
					written[h.Name] = time.Now()
				} else if !apierrors.IsConflict(err) && ctx.Err() == nil {
					t.Logf("stand-in status: %v", err)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// detachable: the provisioning states in which the baremetal-operator
// detaches a host (v0.13.2, checkDetachedHost).
func detachable(s metal3.ProvisioningState) bool {
	switch s {
	case metal3.StateProvisioned, metal3.StateExternallyProvisioned, metal3.StateReady, metal3.StateAvailable:
		return true
	}
	return false
}

// detach makes host detached as the baremetal-operator does it: the
// annotation, then (the state provisioned and Ironic's detach done) the
// status.
func detach(t *testing.T, c client.Client, ns, host string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, change(ctx, c, ns, host, func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, metal3.DetachedAnnotation, "")
	}))
	setStatus(t, c, ns, host, func(s *metal3.BareMetalHostStatus) {
		s.Provisioning.State = metal3.StateProvisioned
		s.OperationalStatus = metal3.OperationalStatusDetached
	})
}

// setStatus writes a host's status as the operator would.
func setStatus(t *testing.T, c client.Client, ns, host string, f func(*metal3.BareMetalHostStatus)) {
	t.Helper()
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: host}, &h))
	f(&h.Status)
	require.NoError(t, c.Status().Update(context.Background(), &h))
}

// TestOneActorPerHost (issue 28, B6): next to a baremetal-operator (a
// stand-in for its power loop), rebootkit's reboot controller powers only
// the detached host and refuses the managed one with an event; the
// remediation of a Machine on the managed host goes through the
// operator's reboot annotation and status (as CAPM3 does): the Node is
// deleted only while that host is off, and it comes back. Each host's
// power calls come from one actor. On the old code rebootkit powered the
// managed host too, behind the operator.
func TestOneActorPerHost(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	managed := newBMH(t, direct, ns, "managed")
	managed.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m1-m3m", Namespace: ns}
	require.NoError(t, direct.Update(ctx, managed))
	newBMH(t, direct, ns, "detached")
	detach(t, direct, ns, "detached")
	hws := map[string]*fake.Power{"managed": fake.NewPower(time.Now, fake.PowerConfig{}), "detached": fake.NewPower(time.Now, fake.PowerConfig{})}
	log := &actors{}

	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power: func(name string) (power.Controller, error) {
			return tagged{Controller: hws[name], host: name, actor: "rebootkit", log: log}, nil
		},
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(10000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec}).SetupWithManager(mgr))
	rem := NewRemediationReconciler(mgr.GetClient(), ns, Ownership{}, remediation.Config{Timeout: time.Minute, PollInterval: 200 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	rem.Hosts.(*OwnedHosts).Operator.StaleReads = time.Second // the stand-in's reading is current
	fc := &fenceCheck{NodeStore: rem.Nodes, hw: hws["managed"]}
	rem.Nodes = fc
	require.NoError(t, (&RemediationController{Name: "remediation-" + ns, Reconciler: rem, Namespace: ns}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	go func() { defer wg.Done(); operatorStandIn(ctx, t, direct, ns, hws, log) }()
	defer func() { cancel(); wg.Wait() }()

	// A phased reboot request on each host: both are powered off and held,
	// the managed one by the operator, the detached one by rebootkit;
	// rebootkit refuses the managed one with an event.
	key := reboot.AnnotationPrefix + "test"
	annotate := func(h string, v any) {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
		require.NoError(t, direct.Patch(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h}},
			client.RawPatch(types.MergePatchType, raw)))
	}
	for _, h := range []string{"managed", "detached"} {
		annotate(h, `{"mode":"hard"}`)
	}
	deadline := time.Now().Add(60 * time.Second)
	for hws["managed"].HardwareOn() || hws["detached"].HardwareOn() {
		require.True(t, time.Now().Before(deadline), "not powered off: %v / %v", hws["managed"].Truth(), hws["detached"].Truth())
		time.Sleep(50 * time.Millisecond)
	}
	refused := false
	for !refused && time.Now().Before(deadline) {
		select {
		case e := <-rec.Events:
			refused = strings.Contains(e, "RebootRefused") && strings.Contains(e, "host managed is managed by the baremetal-operator")
		case <-time.After(100 * time.Millisecond):
		}
	}
	assert.True(t, refused, "a RebootRefused event on the managed host")
	for _, h := range []string{"managed", "detached"} {
		annotate(h, nil)
	}
	for !hws["managed"].HardwareOn() || !hws["detached"].HardwareOn() {
		require.True(t, time.Now().Before(deadline), "not powered on: %v / %v", hws["managed"].Truth(), hws["detached"].Truth())
		time.Sleep(50 * time.Millisecond)
	}

	// Remediation of the Machine on the managed host, with a simulated
	// kubelet that registers the Node again when the host runs.
	nodeName := fmt.Sprintf("node-op-%d", time.Now().UnixNano())
	m := newMachine(t, direct, ns, "m1", false)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
	require.NoError(t, direct.Status().Update(ctx, m))
	register := func() error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := direct.Create(ctx, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return direct.Status().Update(ctx, n)
	}
	require.NoError(t, register())
	var mu sync.Mutex
	gone, goneWhileOn := false, false
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var cur corev1.Node
			if err := direct.Get(ctx, types.NamespacedName{Name: nodeName}, &cur); apierrors.IsNotFound(err) {
				on := hws["managed"].HardwareOn()
				mu.Lock()
				if !gone {
					gone, goneWhileOn = true, on
				}
				mu.Unlock()
				if on {
					_ = register()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	require.NoError(t, direct.Patch(ctx, m, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+remediation.NeedsRemediationAnnotation+`":""}}}`))))
	ms := &Machines{Client: direct, Namespace: ns}
	deadline = time.Now().Add(90 * time.Second)
	for {
		rec, err := ms.Get(ctx, "m1")
		if err == nil && rec.State.Phase == remediation.PhaseDone && !rec.Machine.NeedsRemediation {
			break
		}
		require.True(t, time.Now().Before(deadline), "remediation not done: %+v %v; power %v", rec.State, err, hws["managed"].Truth())
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	assert.True(t, gone, "the Node was deleted")
	_ = goneWhileOn // the kubelet's view lags; the check is at the deletion itself
	fences, whileOn := fc.counts()
	assert.Positive(t, fences)
	assert.Zero(t, whileOn, "the Node was deleted while the host was off (ground truth at the deletion)")
	mu.Unlock()
	assert.True(t, hws["managed"].HardwareOn(), "the host is back on")

	// One actor per host.
	assert.Equal(t, []string{"baremetal-operator"}, keys(log.of("managed")), "managed host: %v", log.of("managed"))
	assert.Equal(t, []string{"rebootkit"}, keys(log.of("detached")), "detached host: %v", log.of("detached"))
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
