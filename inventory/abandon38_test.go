package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestAbandonedMidCycleTakenBackAfterCutOff (review 38 round 2): cn0's
// BMC accepted a soft power-off whose OS shutdown takes 40 s, then hangs;
// the operator abandons cn0 in plan p1 at once. A job of another plan
// must not take cn0 back while that power-off may still land (it would
// drain and reboot a server about to go off): refused, ErrServerBusy,
// until the cut-off (the last power-off plus ShutdownMax) has passed;
// then taken back. Old code: taken back at once (Abandon forgot the
// cut-off).
func TestAbandonedMidCycleTakenBackAfterCutOff(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 40 * time.Second})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	b.mode = bmcOffHung
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, 10*time.Second)
	err := w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "other", PlanUUID: "p9"})
	require.ErrorIs(t, err, ErrServerBusy, "a job of another plan takes cn0 back while a power-off sent before may still land")
	assert.Contains(t, err.Error(), "abandoned by the operator mid power cycle")
	w.run(ids, w.f.opts.ShutdownMax)
	require.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "other", PlanUUID: "p9"}), "taken back once no power-off of ours can land")
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.Empty(t, h.Abandoned)
	assert.False(t, h.AbandonedCycle)
}

// TestTakenBackOffServerPoweredOnWhenNewJobCancelled (CI's
// TestJobStateMachineAbandonsSlowProbes failure of 2026-11-26): cn0's
// soft power-off lands after the operator abandoned cn0 mid power cycle,
// and nobody powers it on by hand. A job of another plan takes it back
// after the cut-off and is cancelled at once, before its own reboot. The
// fleet took back the abandoned cycle with the server: it powers cn0 on
// (ground truth: the fake hardware), never off again. Old code: cn0 was
// left off for good, abandoned by nobody and reconciled by nobody.
func TestTakenBackOffServerPoweredOnWhenNewJobCancelled(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 20 * time.Second})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, w.f.opts.ShutdownMax+time.Minute)
	require.False(t, b.p.HardwareOn(), "the soft power-off sent before the abandon landed")
	a := plan.Action{Server: ids[0], JobUUID: "other", PlanUUID: "p9"}
	require.NoError(t, w.f.CreateJob(w.ctx(), a), "taken back once no power-off of ours can land")
	require.NoError(t, w.f.CancelJob(w.ctx(), a))
	offs := len(b.offs)
	for i := 0; i < 300 && !b.p.HardwareOn(); i++ {
		w.run(ids, time.Second)
	}
	assert.True(t, b.p.HardwareOn(), "the fleet took back the abandoned power cycle with the server: it powers cn0 on")
	w.run(ids, 5*time.Minute)
	assert.True(t, b.p.HardwareOn(), "and it stays on")
	assert.Len(t, b.offs, offs, "no power-off after the take-back whose job was cancelled")
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.False(t, h.needsKeeping(), "the cycle settled once cn0 read on: %+v", h)
}
