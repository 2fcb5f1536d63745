package kube

import (
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// TestConflictBackoff (issue 39, review round 4, points 2/3): a host's
// run of write conflicts is retried after 1 ms doubling up to
// conflictCap (never every millisecond for ever), brings one
// RebootConflict event at its conflictEventAfter-th conflict, and ends
// with a pass that does not conflict.
func TestConflictBackoff(t *testing.T) {
	rec := events.NewFakeRecorder(100)
	c := &RebootController{Recorder: rec}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h1", Namespace: "ns"}}
	var total time.Duration
	for i := 1; i <= 40; i++ {
		d := c.conflictDelay("h1", bmh)
		want := min(time.Millisecond<<(i-1), conflictCap)
		require.Equal(t, want, d, "conflict %d", i)
		total += d
	}
	assert.Greater(t, total, time.Minute, "40 conflicts in a row take minutes, not 40 ms")
	evs := drainEvents(rec)
	require.Len(t, evs, 1, "one event per run")
	assert.True(t, strings.Contains(evs[0], "RebootConflict") && strings.Contains(evs[0], "--show-managed-fields"), "the event says the fix: %q", evs[0])
	c.conflictsEnd("h1")
	assert.Equal(t, time.Millisecond, c.conflictDelay("h1", bmh), "a new run starts at 1 ms")
	assert.Equal(t, time.Millisecond, c.conflictDelay("h2", nil), "per host")
}
