package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36zFix_RestartAfterOnlineBackSlowShutdownOffAnHour: the
// root of TestReview36z_RestartAfterOnlineBackDuringShutdownOffAnHour
// with an OS shutdown inside the documented bound (170 s < SoftTimeout):
// a restarted controller must count the Online=false enforcement's soft
// power-off (Status.OfflineSoftSince) as one that may still be under way
// though Online=true cleared OfflineSince, and send no power-on until
// it is over (offOver), or the power-on goes to the running host, the
// OS then powers it off, and the accepted power-on answers the run
// for up to an hour.
func TestReview36zFix_RestartAfterOnlineBackSlowShutdownOffAnHour(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 170 * time.Second})
	var ons atomic.Int64
	w.Power = stuckReadingNoopOn{pw, &ons}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(2*time.Hour), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, at.Add(20*time.Second), at)
	_, first, ok := review36FirstOffFrom(pw, at)
	require.True(t, ok && first.Mode == power.ModeSoft, "the setup: the soft power-off went out first")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	back := clk.Real()
	review36uLoop(t, rec, clk, back.Add(10*time.Second), at)
	rec = w.newRec() // a restart 10 s after Online=true, the OS still shutting down
	end := back.Add(20 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(back, end), "the setup: the OS shutdown powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(),
		"Online set back true 20 s into a 170 s OS shutdown Online=false began, BMC stuck reading Transitioning, the controller restarted 10 s later: still off 20 min later (power-ons asked %d); status %+v; truth %s",
		ons.Load(), h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36zFix_AnsweredNullReadsPowerCallsTimeOutBackOff: the other
// side of TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack. A BMC
// whose reads are answered (null: its power sensor lost) but whose every
// power call times out (its power-control path hung) is not a BMC back
// from an outage: a fence's ForceOff backs off (Call.Fails grows; only a
// read answered after one that got none ends it), not one every
// RetryDelay (360 an hour).
func TestReview36zFix_AnsweredNullReadsPowerCallsTimeOutBackOff(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	var hung atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if hung.Load() && c.Op != fake.OpState {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	w.Power = nullAlways{pw}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	hung.Store(true)
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(time.Hour), at)
	calls := 0
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(at) {
			calls++
		}
	}
	require.LessOrEqual(t, calls, 16,
		"a fence of a host whose BMC answers reads (null) but times out every power call: %d power-offs in an hour", calls)
}
