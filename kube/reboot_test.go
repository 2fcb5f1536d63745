package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rk-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	return ns.Name
}

func newBMH(t *testing.T, c client.Client, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "x"}},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://127.0.0.1/redfish/v1/Systems/1", CredentialsName: name + "-bmc"}}}
	require.NoError(t, c.Create(context.Background(), h))
	return h
}

// TestRebootHostsOnAPIServer: the store reads and writes real
// BareMetalHosts; the status is written with the annotations in one
// update; stale versions and concurrent writers are conflicts.
func TestRebootHostsOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h1")
	s := &RebootHosts{Client: c, Namespace: ns}

	h, err := s.Get(ctx, "h1")
	require.NoError(t, err)
	assert.True(t, h.Online)
	assert.False(t, h.Deprovisioned)

	// A reboot request, then the controller's write removing it with the
	// status, in one update.
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	bmh.Annotations = map[string]string{reboot.Annotation: "", "other": "kept"}
	require.NoError(t, c.Update(ctx, &bmh))
	h, err = s.Get(ctx, "h1")
	require.NoError(t, err)
	assert.Contains(t, h.Annotations, reboot.Annotation)
	stale := h
	delete(h.Annotations, reboot.Annotation)
	h.Status.PendingRebootSince = time.Unix(1700000000, 0).UTC()
	h2, err := s.Update(ctx, h)
	require.NoError(t, err)
	assert.NotEqual(t, h.Version, h2.Version)
	got, err := s.Get(ctx, "h1")
	require.NoError(t, err)
	assert.NotContains(t, got.Annotations, reboot.Annotation)
	assert.Equal(t, "kept", got.Annotations["other"])
	assert.True(t, got.Status.PendingRebootSince.Equal(h.Status.PendingRebootSince))

	// Stale version: refused, nothing written.
	_, err = s.Update(ctx, stale)
	assert.ErrorIs(t, err, reboot.ErrConflict)
	// A concurrent writer between the read and the write.
	cur, err := s.Get(ctx, "h1")
	require.NoError(t, err)
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	bmh.Labels["touched"] = "yes"
	require.NoError(t, c.Update(ctx, &bmh))
	_, err = s.Update(ctx, cur)
	assert.ErrorIs(t, err, reboot.ErrConflict)
	_, err = s.Get(ctx, "missing")
	assert.ErrorIs(t, err, reboot.ErrNotFound)
}

// TestRebootControllerOnAPIServer: the controller, under a real manager,
// sees an annotation-only change (no generation bump), powers the host off
// and on (ground truth of the fake power), removes the annotation and
// persists lastPoweredOn; a keyed request holds the host off until it is
// removed.
func TestRebootControllerOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	// The controller runs as a user bound to the generated role
	// (config/rbac/role.yaml): a missing permission fails the test.
	mgr := namespacedManager(t, ns)
	c := mgr.GetClient()
	newBMH(t, direct, ns, "h1")
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
	rec := &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: ns}, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 500 * time.Millisecond, SoftTimeout: 2 * time.Second}}
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rec, Namespace: ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }() // stop the manager before the test returns

	annotate := func(set map[string]string, remove ...string) {
		t.Helper()
		for i := 0; ; i++ {
			var bmh metal3.BareMetalHost
			require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
			gen := bmh.Generation
			if bmh.Annotations == nil {
				bmh.Annotations = map[string]string{}
			}
			for k, v := range set {
				bmh.Annotations[k] = v
			}
			for _, k := range remove {
				delete(bmh.Annotations, k)
			}
			err := direct.Update(ctx, &bmh)
			if err == nil {
				assert.Equal(t, gen, bmh.Generation, "annotations do not bump the generation")
				return
			}
			require.Less(t, i, 20, "update: %v", err)
		}
	}
	wait := func(what string, cond func(reboot.Host) bool) reboot.Host {
		t.Helper()
		s := &RebootHosts{Client: direct, Namespace: ns}
		deadline := time.Now().Add(30 * time.Second)
		for {
			h, err := s.Get(ctx, "h1")
			if err == nil && cond(h) {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v, power %v", what, h, hw.Truth())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := time.Now()
	annotate(map[string]string{reboot.Annotation: `{"mode":"hard"}`})
	h := wait("the reboot to be done", func(h reboot.Host) bool {
		_, pending := h.Annotations[reboot.Annotation]
		return !pending && h.Status.LastPoweredOn.After(before) && hw.HardwareOn()
	})
	offs := 0
	for _, tc := range hw.Truth() {
		if !tc.On {
			offs++
		}
	}
	assert.Equal(t, 1, offs, "one power cycle")
	assert.False(t, h.Status.Pending())

	// A keyed request holds the host off until it is removed.
	key := reboot.AnnotationPrefix + "fencing"
	annotate(map[string]string{key: ""})
	wait("off and held", func(reboot.Host) bool { return !hw.HardwareOn() })
	time.Sleep(time.Second)
	assert.False(t, hw.HardwareOn(), "held off while the key is there")
	annotate(nil, key)
	wait("powered on after the release", func(h reboot.Host) bool { return hw.HardwareOn() && !h.Status.Pending() })
	// A malformed request (the API server refuses malformed keys itself)
	// becomes an event on the host.
	annotate(map[string]string{reboot.AnnotationPrefix + "odd": `{"mode":"sideways"}`})
	deadline := time.Now().Add(20 * time.Second)
	for {
		var evs corev1.EventList
		require.NoError(t, direct.List(ctx, &evs, client.InNamespace(ns)))
		found := false
		for _, e := range evs.Items {
			found = found || e.Reason == "RebootAnnotation"
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no RebootAnnotation event: %v", fmt.Sprint(len(evs.Items)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = errors.New
}
