package kube

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// acceptBMC waits (up to wait) for host name's RebootRecord to be marked
// BMCChanged and accepts the host's spec.bmc as an administrator does
// (acceptCommand: the BMC named in the mark), through c.
func acceptBMC(t *testing.T, ctx context.Context, c client.Client, ns, name string, wait time.Duration) {
	t.Helper()
	var rec v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &rec) == nil && rec.Spec.BMCChanged != nil
	}, wait, 20*time.Millisecond, "the record of %s is marked BMCChanged", name)
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &bmh))
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"bmcChanged": map[string]any{"address": bmh.Spec.BMC.Address,
		"credentialsName": bmh.Spec.BMC.CredentialsName, "disableCertificateVerification": bmh.Spec.BMC.DisableCertificateVerification}}})
	require.NoError(t, err)
	require.NoError(t, c.Patch(ctx, &rec, client.RawPatch(types.MergePatchType, raw)))
}
