package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// Regression tests of issue 37 B (plan policy) and issue 40 point 1; each
// fails on the code before the fix for the reason in its comment.

// worldWith is newWorld with a blocking condition "no-alerts" (holding
// at first) and the executor acting through ff.
func worldWith(t *testing.T, fs []fake.FleetServer, primary string, o plan.CreateOptions) (*world, *flakyFleet) {
	o.Conditions = []plan.Condition{{Name: "no-alerts", Command: []string{"check"}}}
	w := newWorld(t, fs, primary, o)
	w.fleet.SetCondition("no-alerts", true, "")
	ff := &flakyFleet{Fleet: w.fleet}
	w.exec = &plan.Executor{Fleet: ff, Store: w.store, Now: w.clk.Now}
	return w, ff
}

// tryPass is a pass that may fail as drawn by the test (errKilled).
func (w *world) tryPass() plan.Plan {
	_, _ = w.exec.Pass(w.ctx, w.uuid)
	p, _ := w.store.Get(w.ctx, w.uuid)
	return p
}

// Point 7: the shard primary's reboot froze the shard, then a blocking
// condition failed before its job was created. The old code kept the
// shard frozen, with no job, for as long as the condition failed (10 h
// here); now the held reboot unfreezes it at once, and freezes again only
// when its job can start.
func TestRegression37HoldUnfreezesShard(t *testing.T) {
	fs := fleetServers(0, 3, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(1)
	w, _ := worldWith(t, fs, fs[0].UUID, o)
	w.tryPass() // the primary's reboot asks for the freeze
	frozen, _ := w.fleet.Frozen()
	require.True(t, frozen, "the primary's reboot freezes the shard first")
	w.fleet.SetCondition("no-alerts", false, "ALERT")
	for i := 0; i < 600; i++ {
		w.clk.Advance(time.Minute)
		w.tryPass()
	}
	assert.Empty(t, w.fleet.JobsCreated(), "nothing starts while the condition fails")
	assert.LessOrEqual(t, w.fleet.FrozenWithoutJob(), 2*time.Minute, "the shard stayed frozen with no job for %s", w.fleet.FrozenWithoutJob())
	w.fleet.SetCondition("no-alerts", true, "")
	final := w.runUntilDone(time.Minute, 500)
	assert.Equal(t, plan.StateComplete, final.State, plan.Table(final))
	frozen, _ = w.fleet.Frozen()
	assert.False(t, frozen, "the shard is unfrozen at the end")
	assert.LessOrEqual(t, w.fleet.FrozenWithoutJob(), 2*time.Minute)
}

// Point 8: a reboot whose job was lost (the executor killed between save
// and act) is held by a failing blocking condition; the operator cancels
// (or stops) the plan; the condition clears. The old code created the job
// then, after the cancel. Now nothing starts after the cancel, the held
// reboot is released (not started, no failure) and the plan ends; after a
// stop nothing starts until the operator runs the plan again.
func TestRegression37CancelReleasesHeld(t *testing.T) {
	for _, cmd := range []string{"cancel", "stop"} {
		t.Run(cmd, func(t *testing.T) {
			fs := fleetServers(0, 3, time.Minute)
			o := opts()
			o.Concurrency = plan.Count(1)
			w, ff := worldWith(t, fs, "", o)
			ff.failNext = true
			p := w.tryPass()
			require.Equal(t, plan.StepJob, p.Reboots[0].Step)
			require.Empty(t, w.fleet.JobsCreated(), "the job was lost")
			w.fleet.SetCondition("no-alerts", false, "ALERT")
			w.clk.Advance(time.Minute)
			w.tryPass()
			f := map[string]func(plan.Plan) (plan.Plan, error){"cancel": plan.Cancel, "stop": plan.Stop}[cmd]
			_, err := plan.Command(w.ctx, w.store, w.uuid, f)
			require.NoError(t, err)
			w.fleet.SetCondition("no-alerts", true, "")
			for i := 0; i < 300; i++ {
				w.clk.Advance(time.Minute)
				p = w.tryPass()
			}
			assert.Empty(t, w.fleet.JobsCreated(), "a job was created after the %s", cmd)
			assert.Nil(t, p.Reboots[0].CanceledAt, "a reboot that never started is no failure")
			if cmd == "cancel" {
				assert.False(t, p.Unfinished(), "the held reboot is released: %s", plan.Table(p))
				assert.Equal(t, plan.Step("released"), p.Reboots[0].Step)
				return
			}
			_, err = plan.Command(w.ctx, w.store, w.uuid, plan.Run)
			require.NoError(t, err)
			final := w.runUntilDone(time.Minute, 500)
			assert.Equal(t, plan.StateComplete, final.State, plan.Table(final))
		})
	}
}

// Point 9: a rack limit of 1 and one server of rack r00 down for other
// reasons for good. The old code held the next reboot of r00 and with it
// every reboot after it: racks r01 and r02, with nothing offline and free
// slots, were never rebooted. A domain limit holds only its own domain.
func TestRegression37DomainLimitHoldsOnlyItsDomain(t *testing.T) {
	for _, views := range []bool{false, true} {
		onViews = views
		fs := racks(3, 3, time.Minute)
		o := opts()
		o.Concurrency, o.FailureBudget = plan.Count(3), plan.Count(3)
		o.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: 1}}
		w := newWorld(t, fs, "", o)
		w.fleet.SetDown(fs[1].UUID, true) // r00's second server, down for good
		var p plan.Plan
		for i := 0; i < 300; i++ {
			p = w.pass()
			w.clk.Advance(time.Minute)
		}
		for _, r := range p.Reboots {
			if r.Labels["rack"] != "r00" {
				assert.Equal(t, plan.StepDone, r.Step, "%s in %s (views %v): %s", r.ServerHostname, r.Labels["rack"], views, p.Waiting)
			}
		}
		assert.Contains(t, p.Waiting, "rack r00", plan.Table(p))
	}
	onViews = false
}

// Point 11: a reboot's job was lost (the executor killed between save and
// act), and a blocking condition then held it for 3 hours, past the 1-hour
// JobTimeout. The old code let the JobTimeout run and recorded the reboot
// failed (with budget 0 the plan failed) although no job ever existed.
func TestRegression37LostJobNotFailure(t *testing.T) {
	fs := fleetServers(0, 2, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(1)
	w, ff := worldWith(t, fs, "", o)
	ff.failNext = true
	w.tryPass()
	require.Empty(t, w.fleet.JobsCreated())
	w.fleet.SetCondition("no-alerts", false, "ALERT")
	var p plan.Plan
	for i := 0; i < 180; i++ {
		w.clk.Advance(time.Minute)
		p = w.tryPass()
	}
	assert.Nil(t, p.Reboots[0].CanceledAt, "never started, never failed: %s", plan.Table(p))
	assert.Equal(t, plan.StateRunning, p.State)
	w.fleet.SetCondition("no-alerts", true, "")
	final := w.runUntilDone(time.Minute, 500)
	assert.Equal(t, plan.StateComplete, final.State, plan.Table(final))
	for s, n := range w.fleet.JobsCreated() {
		assert.Equal(t, 1, n, s)
	}
}

// ownFleet is a plan.Fleet of one's own: none of the optional abilities
// (no headnode, no shard, no views).
type ownFleet struct{ plan.Fleet }

// Issue 40 point 1: a Fleet of one's own without a headnode leaves
// Observations.HeadnodeServicesUp at its zero value (fake.Fleet's
// SetHeadnodeZero shows it). The old code parked every reboot in
// wait_headnode with an empty Waiting and failed them after
// ServicesTimeout ("headnode services not up"). A plan with no headnode
// does not wait for one.
func TestRegression40NoHeadnodeNoWait(t *testing.T) {
	for _, own := range []bool{true, false} {
		fs := fleetServers(0, 3, time.Minute)
		o := opts()
		w := newWorld(t, fs, "", o)
		w.fleet.SetHeadnodeZero(true)
		if own {
			w.exec = &plan.Executor{Fleet: ownFleet{w.fleet}, Store: w.store, Now: w.clk.Now}
		}
		final := w.runUntilDone(time.Minute, 200)
		assert.Equal(t, plan.StateComplete, final.State, "own fleet %v: %s", own, plan.Table(final))
		for _, p := range w.snaps {
			assert.NotContains(t, p.Waiting, "headnode")
		}
	}
}
