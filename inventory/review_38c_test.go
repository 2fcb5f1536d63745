package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview38_TakeBackAtCutOffFreesSlotBeforeOffLandedIsSeen (review 38
// round 3): at concurrency 1, cn0's BMC accepts a soft power-off whose OS
// shutdown takes ShutdownMax-3s, then hangs; the operator abandons cn0 in
// plan p1. cn0 goes off 3 s before its cut-off. Its last health result is
// a check begun 6 s before the cut-off (it passed: cn0 still ran), still
// younger than HealthMaxAge at the cut-off. At the cut-off a job of another
// plan takes cn0 back (CreateJob compares the monotonic cut-off only), and
// takeBack clears AbandonedCycle: from then on cn0 counts as down only if
// its (stale, passing) health result says so, so plan p1 counts it up and
// powers off cn1 next to it. Ground truth (maxOff): two servers off at
// once, concurrency 1. Expected: the take-back (or the down accounting)
// waits for a health check begun after the cut-off, as offLanded does for
// every other server.
func TestReview38_TakeBackAtCutOffFreesSlotBeforeOffLandedIsSeen(t *testing.T) {
	w, ids := newWorld(t, 3, 1)
	w.budget = 3
	w.slowProbes = true
	w.open()
	defer func() { w.close() }()
	sm := w.f.opts.ShutdownMax
	b := w.bmcs[ids[0]]
	b.p = fake.NewPower(w.clk.Real, fake.PowerConfig{SoftDelay: sm - 3*time.Second})
	stale := map[string]bool{}
	probe := func() {
		for _, id := range ids {
			if !stale[id] {
				w.f.probeResult(id, w.healthNow(id) == nil, w.clk.Monotonic())
			}
		}
	}
	tick := func() {
		probe()
		w.pass()
		for _, id := range ids {
			w.step(id)
		}
		w.check()
		w.clk.Advance(time.Second)
	}
	w.clk.Advance(time.Minute) // every server booted
	probe()
	w.newPlan()
	for i := 0; i < 120 && len(b.offs) == 0; i++ {
		tick()
	}
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	b.mode = bmcOffHung
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	horizon := w.f.offHorizon(ids[0])
	for w.clk.Monotonic() < horizon-6*time.Second {
		tick()
	}
	probe()
	stale[ids[0]] = true // cn0's next check is slow: its last one began now
	for w.clk.Monotonic() < horizon {
		tick()
	}
	require.False(t, b.p.HardwareOn(), "cn0's late power-off landed before its cut-off")
	if err := w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "other", PlanUUID: "p9"}); err != nil {
		t.Logf("take-back refused: %v", err)
	}
	for range 12 {
		tick() // fails in w.check: 2 servers off at once, concurrency 1
	}
}

// TestReview38_AbandonedCycleCountsDownAfterEveryRestart (review 38 round
// 3): cn0 is abandoned mid power cycle (a soft power-off accepted, its
// BMC then hanging); the power-off lands, the operator powers cn0 on by
// hand, and cn0 passes health checks begun long after its cut-off: it no
// longer counts as down, and the plan finishes its other servers. Then the
// executor restarts. Nothing was sent to cn0 since, yet AbandonedCycle
// (cleared only when a job of another plan takes cn0 back) makes it count
// as down again for ShutdownMax after this start (offHorizon falls back to
// the fleet's start), and after every later restart, for as long as no
// other plan takes it: a slot of every plan that includes it is taken and
// a job of another plan is refused (ErrServerBusy) each time. Expected:
// once a health check begun after the cut-off passed, the abandoned power
// cycle is settled (AbandonedCycle cleared, as keep() settles an ended
// job's cycle), and a restart does not bring it back.
func TestReview38_AbandonedCycleCountsDownAfterEveryRestart(t *testing.T) {
	w, ids := newWorld(t, 3, 1)
	w.budget = 3
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 40 * time.Second})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	b.mode = bmcOffHung
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, time.Minute)
	require.False(t, b.p.HardwareOn(), "the late power-off landed")
	b.p.OutOfBandOn() // the operator, by hand
	w.run(ids, w.f.opts.ShutdownMax+30*time.Minute)
	p, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	obs, err := w.f.Observe(w.ctx(), p)
	require.NoError(t, err)
	require.False(t, obs.Servers[ids[0]].Down, "before the restart: cn0 runs and passed checks begun after its cut-off")

	w.close()
	w.clk.Advance(time.Hour)
	w.open()
	obs, err = w.f.Observe(w.ctx(), p)
	require.NoError(t, err)
	assert.False(t, obs.Servers[ids[0]].Down, "after a restart: nothing was sent to cn0 for hours, it runs and passes its checks, yet it counts as down (a slot taken) for ShutdownMax")
	assert.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "other", PlanUUID: "p9"}),
		"a job of another plan is refused for ShutdownMax after every restart")
}
