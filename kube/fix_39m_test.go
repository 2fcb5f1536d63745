package kube

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// recreated39m runs the scene of TestReview39m_RestartForgetsOwedOnInFlight
// with the host deleted and created again under the same name (its BMC
// the pinned one, with the fencer's keyed hold) instead of spec.bmc
// restored, while the owed power-on's On is on its way to the slow BMC:
// restart restarts the controller first; dropRecord deletes the
// RebootRecord with the host (the garbage collector's work, which envtest
// does not do). Ground truth: the BMC's hardware stays off from the first
// instant the new host's record reports the keyed request fenced.
func recreated39m(t *testing.T, restart, dropRecord bool) {
	needAPIServer(t)
	ctx := context.Background()
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler { return slowOn39l(h, armed, delay39l) })
	time.Sleep(stale39m + 300*time.Millisecond)
	if restart {
		s.stop()
		s.start()
	}
	key := types.NamespacedName{Namespace: s.ns, Name: "h1"}
	var old metal3.BareMetalHost
	require.NoError(t, s.direct.Get(ctx, key, &old))
	require.NoError(t, s.direct.Delete(ctx, &old))
	if dropRecord {
		require.NoError(t, s.direct.Delete(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "h1"}}))
	}
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "h1", Labels: map[string]string{"app": "x"}},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: redfishAt(s.srv1), CredentialsName: "h1-bmc"}}}
	hold39m(h)
	require.NoError(t, s.direct.Create(ctx, h))
	created := time.Now()
	var fencedAt time.Time
	deadline := time.Now().Add(delay39l + 5*time.Second)
	for time.Now().Before(deadline) {
		var rec v1alpha1.RebootRecord
		var cur metal3.BareMetalHost
		if fencedAt.IsZero() && s.direct.Get(ctx, key, &cur) == nil && s.direct.Get(ctx, key, &rec) == nil {
			if st, ok := recordStatus(&rec, &cur, true); ok && st.Fenced(created, time.Now()) {
				fencedAt = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.False(t, fencedAt.IsZero(), "premise: the keyed request is reported fenced; events %q", drainEvents(s.rec))
	assert.True(t, s.hw1.OffThroughout(fencedAt, time.Now()),
		"a host created again under the same name, reported fenced for a keyed request (at %v, %v after its creation), stays off "+
			"while it is held (transitions %+v; calls %+v; events %q)",
		fencedAt, fencedAt.Sub(created), s.hw1.Transitions(), s.hw1.Calls(), drainEvents(s.rec))
}

// TestFix39m_RecreatedHostAfterRestartWaitsForOwedOn: the record of the
// earlier host keeps PowerOnSent, so a controller that restarted while
// the On was on its way replaces that record (firstSight) only once the
// On can no longer land.
func TestFix39m_RecreatedHostAfterRestartWaitsForOwedOn(t *testing.T) {
	recreated39m(t, true, false)
}

// TestFix39m_RecreatedHostWithoutRecordWaitsInMemory: the host and its
// record deleted (as the garbage collector does) and the host created
// again while the On is on its way, the process that sent it still
// running: its attempt, outliving its mark, holds the new host until it
// settled (earlierHostHold).
func TestFix39m_RecreatedHostWithoutRecordWaitsInMemory(t *testing.T) {
	recreated39m(t, false, true)
}
