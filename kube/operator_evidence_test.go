package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestOperatorEvidenceIsAReading (issue 39, point 4): the operator's
// status.poweredOn is a power reading with the reboot package's rules.
// A host the operator already shows off (status written long before the
// request, and never again: the operator writes only on change) is fenced
// once StaleReads has passed since the request; a status written after
// the request saying off is not evidence before StaleReads has passed
// (Ironic's power state is a cached reading). On the old code the first
// was never fenced (the remediation timed out and the Machine was deleted
// without a fence) and the second was fenced at once.
func TestOperatorEvidenceIsAReading(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h1")
	req := remediation.Request{Value: `{"mode":"hard"}`, At: time.Now().Truncate(time.Second)}
	require.NoError(t, change(ctx, c, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, remediation.RebootAnnotation, req.Value)
	}))
	const stale = 90 * time.Second
	var now time.Time
	s := &OperatorHosts{Client: c, Namespace: ns, HostOf: func(context.Context, string) (string, error) { return "h1", nil },
		Now: func() time.Time { return now }, StaleReads: stale}
	fenced := func(at time.Time) bool {
		t.Helper()
		now = at
		h, err := s.Get(ctx, "m1", req)
		require.NoError(t, err)
		return h.Fenced
	}

	// Off since long before the request; the operator writes nothing new.
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = false
		st.LastUpdated = &metav1.Time{Time: req.At.Add(-time.Hour)}
	})
	assert.False(t, fenced(req.At.Add(2*time.Second)), "a reading may be StaleReads old")
	assert.True(t, fenced(req.At.Add(stale+2*time.Second)), "shown off for longer than StaleReads after the request: fenced")

	// Off, written after the request: still only a reading.
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) {
		st.LastUpdated = &metav1.Time{Time: req.At.Add(2 * time.Second)}
	})
	assert.False(t, fenced(req.At.Add(3*time.Second)), "Ironic's cached Off may predate the request")
	assert.True(t, fenced(req.At.Add(stale+2*time.Second)))

	// On: never fenced.
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) { st.PoweredOn = true })
	assert.False(t, fenced(req.At.Add(stale+10*time.Second)))
}
