package kube

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestForgedTokenTakeKeepsProtectedFields (issue 39 point 2, review round
// 5, the takeRequest side of TestReview39e_ForgedTokenDeputyRemovesProtectedFields):
// on a host with spec.disablePowerOff (the reset path), a reboot client
// under config/admission forges a rebootkit-reset-token entry owning a
// label, the detached annotation and spec.online, then asks for a reboot.
// The controller's take of the request (an apply as that manager) must
// remove none of them: the forged entry is removed first, with nothing
// else, and the request is then taken. Ground truth: the host read
// directly (its fields and managedFields).
func TestForgedTokenTakeKeepsProtectedFields(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	newBMH(t, direct, ns, "h1") // label app=x
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "baremetalhost.metal3.io/detached", "")
		h.Spec.DisablePowerOff = true
	}))
	installPolicy(t, direct, ns)
	rc := rebootClient(t, ns, "mallory")
	waitDenied(t, rc, ns, "h1")
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: 3 * time.Second, RetryDelay: 3 * time.Second, SoftTimeout: time.Second})
	time.Sleep(500 * time.Millisecond)

	forged := `{"f:metadata":{"f:annotations":{"f:baremetalhost.metal3.io/detached":{}},"f:labels":{"f:app":{}}},"f:spec":{"f:online":{}}}`
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		h.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: resetTokenOwner, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: metal3.GroupVersion.String(), Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(forged)}}
	}), "premise: a reboot client may rewrite managedFields")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}), "premise: a reboot client may ask for a reboot")
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
	require.GreaterOrEqual(t, forgedToken(&h), 0, "premise: the forged entry is on the host")
	taken := false
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
		_, detached := h.Annotations["baremetalhost.metal3.io/detached"]
		if h.Labels["app"] != "x" || !detached || !h.Spec.Online {
			t.Fatalf("the controller's take removed, for a reboot client, what the admission policy forbids it to change: labels %v, "+
				"annotations %v, spec.online %v; events %q", h.Labels, h.Annotations, h.Spec.Online, drainEvents(rec))
		}
		if _, ok := h.Annotations[ResetRequestAnnotation]; ok && tokenOn(&h) {
			taken = true
		}
	}
	require.True(t, taken, "the request is taken once the forged entry is gone; events %q", drainEvents(rec))
	require.Less(t, forgedToken(&h), 0, "the forged entry was removed")
}

// TestTokenClean: a token entry is the controller's only if it owns
// nothing but the bare request and ResetRequestAnnotation.
func TestTokenClean(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{},"f:rebootkit.io/reset-request":{}}}}`:      true,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}}}}`:                                        true,
		`{"f:metadata":{"f:annotations":{}}}`:                                                               true,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{},".":{}}}}`:                                 false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{"f:x":{}}}}}`:                                false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}},"f:labels":{"f:app":{}}}}`:                false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}}},"f:spec":{"f:online":{}}}`:               false,
		`{"f:metadata":{"f:annotations":{"f:baremetalhost.metal3.io/detached":{}}}}`:                        false,
		`{"f:metadata":{"f:annotations":null}}`:                                                             false,
		`{"f:metadata":{"f:labels":{"f:app":{}}},"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}}}}`: false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}},"f:annotations":{"f:x":{}}}}`:             false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{},"f:reboot.metal3.io":{}}}}`:                false,
		`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}}}} {}`:                                     false,
		`[]`: false,
		``:   false,
	} {
		require.Equal(t, want, tokenClean([]byte(raw)), "%s", raw)
	}
}

// FuzzTokenClean: whatever a client writes into managedFields, an entry
// found clean owns no field but the two annotations.
func FuzzTokenClean(f *testing.F) {
	f.Add([]byte(`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{},"f:rebootkit.io/reset-request":{}}}}`))
	f.Add([]byte(`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}},"f:labels":{"f:app":{}}},"f:spec":{"f:online":{}}}`))
	f.Add([]byte(`{"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{"f:a":{}}}}}`))
	f.Add([]byte(`{"f:metadata":{"f:labels":{"f:app":{}}},"f:metadata":{"f:annotations":{"f:reboot.metal3.io":{}}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !tokenClean(raw) {
			return
		}
		var fs struct {
			Metadata struct {
				Annotations map[string]map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		var top map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &top))
		require.Len(t, top, 1)
		require.NoError(t, json.Unmarshal(raw, &fs))
		for k, v := range fs.Metadata.Annotations {
			require.Contains(t, []string{"f:" + reboot.Annotation, "f:" + ResetRequestAnnotation}, k)
			require.Empty(t, v)
		}
	})
}
