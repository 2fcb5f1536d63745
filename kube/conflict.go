package kube

import (
	"context"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// conflictCap is the longest a host's pass waits after a run of write
// conflicts before it decides again.
const conflictCap = 5 * time.Second

// conflictEventAfter is how many conflicts in a row on one host bring a
// RebootConflict event (once per run).
const conflictEventAfter = 8

// conflictDelay notes one more write conflict in a row on host and
// returns how long its pass waits before deciding again: 1 ms, doubling
// with each conflict in the run, at most conflictCap, so that a write the
// API server always refuses is never retried every millisecond for ever.
// The run's conflictEventAfter-th conflict brings a RebootConflict event
// on bmh (nil: none).
func (c *RebootController) conflictDelay(host string, bmh *metal3.BareMetalHost) time.Duration {
	c.refusedMu.Lock()
	if c.conflicts == nil {
		c.conflicts = map[string]int{}
	}
	c.conflicts[host]++
	n := c.conflicts[host]
	c.refusedMu.Unlock()
	if n == conflictEventAfter && bmh != nil && c.Recorder != nil {
		c.eventf(bmh, nil, "Warning", "RebootConflict", "Reboot",
			"host %s: %d writes in a row refused as conflicting (someone else writes the host or its RebootRecord %s at the same time, "+
				"or owns a field rebootkit writes): the controller backs off up to %s between tries; find the other writer "+
				"(kubectl get baremetalhost %s --show-managed-fields)", host, n, host, conflictCap, host)
	}
	d := time.Millisecond << min(n-1, 20)
	return min(d, conflictCap)
}

// conflictsEnd ends host's run of write conflicts.
func (c *RebootController) conflictsEnd(host string) {
	c.refusedMu.Lock()
	delete(c.conflicts, host)
	c.refusedMu.Unlock()
}

// hostFor reads req's host from the controller's cache for an event (nil
// without a Client or when it cannot be read).
func (c *RebootController) hostFor(ctx context.Context, req ctrl.Request) *metal3.BareMetalHost {
	if c.Client == nil {
		return nil
	}
	var bmh metal3.BareMetalHost
	if c.Client.Get(ctx, req.NamespacedName, &bmh) != nil {
		return nil
	}
	return &bmh
}
