package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestResetPathReportsFailedStateRead: a bare request on a host with
// spec.disablePowerOff whose BMC cannot be read (unreachable) is reported
// with a RebootPowerError event, and nothing is sent to it (ground truth:
// no call but the reads).
func TestResetPathReportsFailedStateRead(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpState {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	newBMH(t, direct, ns, "h1")
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	const stale = 300 * time.Millisecond
	rec := review39Env(t, ctx, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	var got string
	for deadline := time.After(10 * time.Second); got == ""; {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, "RebootPowerError") && strings.Contains(e, "power state read failed") {
				got = e
			}
		case <-deadline:
			t.Fatal("no event for a reset request on a host whose BMC cannot be read")
		}
	}
	assert.Contains(t, got, "h1")
	for _, c := range hw.Calls() {
		assert.Equal(t, fake.OpState, c.Op, "a call other than a read was sent: %v", hw.Calls())
	}
}
