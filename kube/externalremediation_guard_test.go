package kube

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// switchGuard is a reboot.Guard whose leadership the test switches.
type switchGuard struct {
	leader atomic.Bool
	holds  atomic.Int32 // refused Holds
}

func (g *switchGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if !g.leader.Load() {
		g.holds.Add(1)
		return nil, nil, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// TestExternalRemediationWithoutLeaseSendsNothing: an external
// remediation controller that does not hold its lease (a leader paused
// past it, another process leading since) writes nothing: no reboot
// request on the host, no admission, no finalizer or status on the
// remediation, and the host is never powered off (ground truth). Once it
// holds the lease, the same remediation fences the host. Before, the
// controller had no Guard (ExternalRemediationController.Guard), and
// main.go wired no lease into it.
func TestExternalRemediationWithoutLeaseSendsNothing(t *testing.T) {
	g := &switchGuard{}
	e := newExtEnvGuarded(t, []string{"h0"}, remediation.MaxCount(1),
		reboot.Config{StaleReads: 500 * time.Millisecond, SoftTimeout: 2 * time.Second}, g)
	n0 := e.nodeOf["h0"]
	start := time.Now()
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	time.Sleep(8 * time.Second) // the controller's time to act (it polls every 200 ms)
	r := e.remediationOf(n0)
	require.NotNil(t, r)
	assert.Empty(t, r.Finalizers, "a controller without its lease added a finalizer")
	assert.Empty(t, r.Status.Host, "a controller without its lease wrote the status")
	assert.False(t, e.held("h0"), "a controller without its lease wrote a reboot request on h0")
	for _, name := range []string{ExternalAdmissionsName, (&Admissions{}).name()} { // node backups; the shared admission record
		var cm corev1.ConfigMap
		err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &cm)
		assert.True(t, apierrors.IsNotFound(err) || len(cm.Data) == 0, "a controller without its lease wrote ConfigMap %s: %v %v", name, err, cm.Data)
	}
	assert.False(t, e.hw["h0"].WasOffDuring(start, time.Now()), "h0 powered off while its remediation controller held no lease (ground truth)")
	assert.Positive(t, g.holds.Load(), "the controller never asked its guard")

	g.leader.Store(true)
	e.eventually("h0 fenced once the controller holds its lease", 60*time.Second, func() bool { return e.offs("h0") > 0 })
}
