package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// interloping wraps a client: before its next Update or Patch, another writer
// changes the same object (a label), so that the Update conflicts.
type interloping struct {
	client.Client
	other client.Client
	armed bool
}

func (c *interloping) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.interlope(ctx, obj); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *interloping) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.interlope(ctx, obj); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *interloping) interlope(ctx context.Context, obj client.Object) error {
	if c.armed {
		c.armed = false
		var n corev1.Node
		if err := c.other.Get(ctx, types.NamespacedName{Name: obj.GetName()}, &n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["written-by"] = "someone-else"
		if err := c.other.Update(ctx, &n); err != nil {
			return err
		}
	}
	return nil
}

// TestNodesOnAPIServer: the Node store on real Nodes: readiness and the
// out-of-service taint read back, idempotent changes, existing metadata
// kept, a concurrent writer's change kept (the store retries its
// conflict), deleting twice is fine.
func TestNodesOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	name := fmt.Sprintf("node-%d", time.Now().UnixNano())
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"keep": "mine"}}}
	require.NoError(t, c.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	require.NoError(t, c.Status().Update(ctx, n))

	ic := &interloping{Client: c, other: c}
	s := &Nodes{Client: ic}
	got, err := s.Get(ctx, name)
	require.NoError(t, err)
	assert.True(t, got.Exists && got.Ready && !got.OutOfService)

	ic.armed = true
	require.NoError(t, s.SetOutOfService(ctx, name, true))
	require.NoError(t, s.SetOutOfService(ctx, name, true), "idempotent")
	got, err = s.Get(ctx, name)
	require.NoError(t, err)
	assert.True(t, got.OutOfService)
	assert.Equal(t, "someone-else", got.Labels["written-by"], "the concurrent writer's change is kept")

	require.NoError(t, s.AddMetadata(ctx, name, map[string]string{"keep": "theirs", "new": "x"}, map[string]string{"a": "b"}))
	got, err = s.Get(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, "mine", got.Labels["keep"], "existing labels are not overwritten")
	assert.Equal(t, "x", got.Labels["new"])
	assert.Equal(t, "b", got.Annotations["a"])

	require.NoError(t, s.SetOutOfService(ctx, name, false))
	got, err = s.Get(ctx, name)
	require.NoError(t, err)
	assert.False(t, got.OutOfService)

	require.NoError(t, s.Delete(ctx, name, got.UID))
	require.NoError(t, s.Delete(ctx, name, got.UID), "deleting a missing Node succeeds")
	got, err = s.Get(ctx, name)
	require.NoError(t, err)
	assert.False(t, got.Exists)
}

// TestAdmissionsOnAPIServer: the storm guard's shared record is a
// compare-and-swap on a ConfigMap: of two writers from the same version,
// one wins and the other gets remediation.ErrConflict.
func TestAdmissionsOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	s := &Admissions{Client: c, Namespace: newNamespace(t, c)}
	a, err := s.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Empty(t, a.Machines)
	first, second := a, a
	first.Machines = []string{"m1"}
	second.Machines = []string{"m2"}
	require.NoError(t, s.PutAdmissions(ctx, first))
	assert.ErrorIs(t, s.PutAdmissions(ctx, second), remediation.ErrConflict, "both created from the empty record")
	a, err = s.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, a.Machines)
	x, y := a, a
	x.Machines = append(x.Machines, "m3")
	y.Machines = []string{}
	require.NoError(t, s.PutAdmissions(ctx, x))
	assert.ErrorIs(t, s.PutAdmissions(ctx, y), remediation.ErrConflict, "stale version")
	a, err = s.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m3"}, a.Machines)
}
