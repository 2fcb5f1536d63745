package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFix39l_RestoreAfterOwedOnSentHoldsUntilItLands: the owed power-on's
// On has been sent (its settle is over) and is slow to land when spec.bmc
// is restored with a keyed hold: once that late On lands, the hold powers
// the host off again and keeps it off (the resolved mark does not leave
// the host running). Ground truth: the pinned BMC's hardware, off for the
// last second of the run. It does not tell whether the reboot package
// waited for the landing (resolvedHold) before acting: it passes either
// way, as the hold re-reads and powers off.
func TestFix39l_RestoreAfterOwedOnSentHoldsUntilItLands(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw1, srv1, rec, hold := owedSetup39l(t, ctx)
	time.Sleep(800 * time.Millisecond) // the attempt's settle (StaleReads 500 ms) is over: its On is on its way
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv1)
		hold(h)
	}))
	time.Sleep(delay39l + 4*time.Second)
	now := time.Now()
	assert.True(t, hw1.OffThroughout(now.Add(-time.Second), now),
		"the keyed hold keeps the host off once the late On landed (transitions %+v; calls %+v; events %q)",
		hw1.Transitions(), hw1.Calls(), drainEvents(rec))
}
