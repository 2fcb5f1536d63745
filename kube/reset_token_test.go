package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// stopAfterDone is a client whose writes stop (fail) right after the
// first write of a finished reset (the one that writes
// LastResetAnnotation, or the one that removes the bare request, whichever
// comes first): a controller that stops between the two writes of Done.
type stopAfterDone struct {
	client.Client
	mu      sync.Mutex
	tripped bool
	failed  bool
}

var errStopped = errors.New("test: the process stopped here")

func (s *stopAfterDone) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	raw, _ := patch.Data(obj)
	s.mu.Lock()
	if s.tripped && !s.failed {
		s.failed = true
		s.mu.Unlock()
		return errStopped
	}
	first := !s.tripped && (strings.Contains(string(raw), LastResetAnnotation) || strings.Contains(string(raw), `"`+reboot.Annotation+`":null`))
	s.tripped = s.tripped || first
	s.mu.Unlock()
	return s.Client.Patch(ctx, obj, patch, opts...)
}

// TestResetDoneSurvivesStopBetweenWrites: a controller that stops between
// the two writes of a finished reset loses nothing: the request is removed
// (with no second reset) and the RebootRecord keeps LastResetAnnotation.
// Before, Done removed the request first and wrote the record second, so
// a stop in between left a pending state with no request, which the next
// pass cleared without LastResetAnnotation. Ground truth: fake power's
// Resets().
func TestResetDoneSurvivesStopBetweenWrites(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	mgr := namespacedManager(t, ns)
	sc := &stopAfterDone{Client: mgr.GetClient()}
	const stale = 500 * time.Millisecond
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: sc, Namespace: ns}, Now: time.Now,
		Power: func(string) (power.Controller, error) { return hw, nil }, Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	start := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool {
		_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
		return !pending
	}, 20*time.Second, 20*time.Millisecond, "the request is answered")
	time.Sleep(time.Second) // the pass that sees no request
	sc.mu.Lock()
	failed := sc.failed
	sc.mu.Unlock()
	require.True(t, failed, "premise: the process stopped between the two writes of Done")
	var record v1alpha1.RebootRecord
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record))
	assert.NotEmpty(t, record.Annotations[LastResetAnnotation], "the reset that answered the request is recorded: %v, events %q",
		record.Annotations, drainEvents(rec))
	assert.Empty(t, record.Annotations[ResetAnnotation], "the state is cleared once no request is seen")
	assert.Nil(t, record.Spec.BMC, "no pin without a pending request")
	assert.Len(t, hw.Resets(), 1, "one request, one reset")
	assert.False(t, hw.WasOffDuring(start, time.Now()), "never off")
}

// TestResetRequestWithdrawnByApply: the controller's token co-owns a
// request it took, so a client that made the request with a server-side
// apply and withdraws it the same way (an apply without it) leaves the
// annotation to the token alone; the controller takes that for a
// withdrawal: it removes the annotation and clears the state (no reset
// after the withdrawal, no request left for ever).
func TestResetRequestWithdrawnByApply(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	const stale = 10 * time.Second // the request stays pending after its reset
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	apply := func(ann map[string]string) {
		meta := map[string]any{"name": "h1", "namespace": ns}
		if ann != nil {
			meta["annotations"] = ann
		}
		raw, err := json.Marshal(map[string]any{"apiVersion": metal3.GroupVersion.String(), "kind": "BareMetalHost", "metadata": meta})
		require.NoError(t, err)
		var h metal3.BareMetalHost
		h.Namespace, h.Name = ns, "h1"
		require.NoError(t, direct.Patch(ctx, &h, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner("fleet-apply")))
	}
	apply(map[string]string{reboot.Annotation: ""})
	require.Eventually(t, func() bool { return len(hw.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "the request's reset")
	time.Sleep(300 * time.Millisecond)
	apply(nil) // withdrawn
	withdrawn := time.Now()
	assert.Eventually(t, func() bool {
		_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
		return !pending
	}, 5*time.Second, 20*time.Millisecond, "a request withdrawn by its owner's apply is gone (the token alone does not keep it)")
	time.Sleep(500 * time.Millisecond)
	var record v1alpha1.RebootRecord
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record))
	assert.Empty(t, record.Annotations[ResetAnnotation], "the state is cleared")
	for _, r := range hw.Resets() {
		assert.False(t, r.After(withdrawn), "no reset after the withdrawal")
	}
	for _, e := range drainEvents(rec) {
		assert.NotContains(t, e, "Normal Reset", "a withdrawn request is not reported done")
	}
}
