package redfish

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProbeCutCountsTowardsMiss (issue 35, readplace.go; round 28's
// suspicion): a read of a system in doubt in the extra place, cut for a
// probe once overdue, was left unanswered at the BMC for its overdue
// time (at least doubtAfter): that silence is the BMC's, not a wait for
// a place, so a read so cut whose caller then gives up is missed. Were
// it not counted, while probes are wanted the systems in doubt would
// keep their ranks, and a dead blade ranked first would take the extra
// place back after every probe, ahead of a healthy neighbour, for as
// long as the BMC stays slow. A read cut for a higher-ranked read
// (made way) is no miss (TestReadPlaceRank).
func TestProbeCutCountsTowardsMiss(t *testing.T) {
	p := newReadPlaces(1)
	s := &session{places: p}
	dead, busy, waiting := &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}
	inDoubt35(dead, 1, time.Now().Add(-time.Hour).UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	r := &readPlace{c: dead, ctx: ctx, get: true, proof: true}
	rctx, err := r.wait()
	require.NoError(t, err)
	require.Equal(t, placeDoubt, r.t.kind)
	// A read of a system not in doubt holds the MaxInFlight place until
	// it is overdue, and another waits: a probe is wanted.
	bt, err := p.take(ctx, busy, true, false)
	require.NoError(t, err)
	defer bt.free()
	go func() {
		if t, err := p.take(ctx, waiting, true, false); err == nil {
			t.free()
		}
	}()
	select {
	case <-rctx.Done(): // cut for the probe, once overdue
	case <-time.After(5 * time.Second):
		t.Fatal("the extra place's overdue read was not cut for a probe")
	}
	require.GreaterOrEqual(t, time.Since(r.t.start), r.doubtAt, "cut before doubtAfter")
	again := r.done(false)
	require.True(t, again, "a cut read whose caller waits is sent again")
	require.False(t, r.madeWay, "a cut for a probe is no cut to make way")

	rc, rcancel := context.WithCancel(ctx)
	r.ctx = rc
	rcancel() // its caller gives up while it waits again
	_, err = r.wait()
	require.Error(t, err)
	require.EqualValues(t, 2, dead.missed.Load(), "the read cut for a probe after doubtAfter at the BMC, then given up, is missed")
}
