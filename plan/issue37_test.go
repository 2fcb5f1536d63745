package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
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

// doneAt returns a plan whose first n reboots are done, each having taken
// took[i] from job creation, the rest pending, at now.
func doneAt(t *testing.T, o plan.CreateOptions, total int, took []time.Duration, now time.Time) plan.Plan {
	p, _, err := plan.Create(servers(0, total), o)
	require.NoError(t, err)
	p.State = plan.StateRunning
	for i, d := range took {
		r := &p.Reboots[i]
		start, end := now.Add(-d-time.Hour), now.Add(-time.Hour)
		r.Step, r.JobUUID = plan.StepDone, plan.JobUUID(p, r.ServerUUID)
		r.StartedAt, r.OperationalAt, r.StepSince = &start, &end, &end
	}
	return p
}

func upObs(p plan.Plan) plan.Observations {
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, HeadnodeServicesUp: true}
	for _, r := range p.Reboots {
		obs.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
	}
	return obs
}

// Point 10: one slow reboot (2 h) among ten of 10 minutes made the longest
// reboot the need of every reboot: no 1-hour window ever fitted again, and
// the operator's expect (30 min) could not lower it. The need is now the
// 90th percentile with the longest left out, or the operator's expect
// when given, and the waiting message names which.
func TestRegression37RobustRebootEstimate(t *testing.T) {
	now := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC) // a daily 22:00-23:00 window opens
	took := []time.Duration{2 * time.Hour}
	for i := 0; i < 10; i++ {
		took = append(took, 10*time.Minute)
	}
	for _, expect := range []time.Duration{0, 30 * time.Minute} {
		o := opts()
		o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}, Expect: expect}
		p := doneAt(t, o, 14, took, now)
		q, acts := plan.Next(p, upObs(p), now)
		require.Len(t, acts, 2, "expect %s: %s", expect, q.Waiting)
		// 55 minutes into the window, nothing fits any more: the message
		// names the estimate. (At 50 minutes a 10-minute reboot ends as
		// the window closes: it fits, now that the estimate is what the
		// reboots took, not their bucket's upper bound.)
		q, acts = plan.Next(p, upObs(p), now.Add(55*time.Minute))
		assert.Empty(t, acts)
		if expect > 0 {
			assert.Contains(t, q.Waiting, "windows expect 30m0s", q.Waiting)
		} else {
			assert.Contains(t, q.Waiting, "the 90th percentile of 11 reboot(s) done", q.Waiting)
		}
	}
}

// Point 12: the fit measured reboots from the job's start but decided at
// its creation, so a job that queued for 20 minutes "fitted" and ended
// after the window closed. Reboots are now measured from the job's
// creation: the queue counts.
func TestRegression37WindowFitCountsQueue(t *testing.T) {
	start := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC)
	fs := fleetServers(0, 4, 10*time.Minute)
	for i := range fs {
		fs[i].Queue = 20 * time.Minute // about 31 min from creation, 11 from start
	}
	o := opts()
	o.Concurrency = plan.Count(1)
	o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}}
	w := newWorldAt(t, start, fs, o)
	for w.clk.Now().Before(start.Add(2 * time.Hour)) {
		w.pass()
		w.clk.Advance(30 * time.Second)
	}
	reboots := w.fleet.Starts()
	require.NotEmpty(t, reboots)
	for _, st := range reboots {
		_, closes, err := o.Windows.Open(st.At)
		require.NoError(t, err)
		end := st.At.Add(fs[0].RebootTime())
		assert.False(t, end.After(closes) && !st.At.Equal(start), "a reboot created at %s ends at %s, after the window closed at %s", st.At, end, closes)
	}
}

// Point 12: with windows that never stay open as long as one reboot takes
// (1-hour windows, an expect of 2 hours) the ETA was a finite 191 hours
// and the waiting message read "outside the maintenance windows until no
// window of at least 2h0m in the next 400 days". The summary now says
// never, and the message says what to do.
func TestRegression37NeverFits(t *testing.T) {
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	o := opts()
	o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}, Expect: 2 * time.Hour}
	p := doneAt(t, o, 20, []time.Duration{time.Hour}, now)
	q, acts := plan.Next(p, upObs(p), now)
	assert.Empty(t, acts)
	assert.NotContains(t, q.Waiting, "until no window")
	assert.Contains(t, q.Waiting, "no maintenance window is open for 2h0m0s")
	assert.Contains(t, q.Waiting, "lengthen the windows or set windows expect")
	s := plan.Summarize(q, now)
	assert.Zero(t, s.ETA)
	assert.Contains(t, s.Line(10), "ETA never")
	v := plan.FullView(q)
	assert.Contains(t, v.SummaryAt(now).Line(10), "ETA never")
}

// Point 12: with a canary ramp of 1 then 3, the headnode's reboot (core,
// rebooted one at a time anyway) used to spend the first canary stage:
// the first non-core reboots then started three at once. The ramp counts
// only the reboots that are not core.
func TestRegression37RampNotSpentOnHeadnode(t *testing.T) {
	fs := fleetServers(1, 6, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(3)
	o.Ramp = []plan.Limit{plan.Count(1), plan.Count(3)}
	w := newWorld(t, fs, "", o)
	w.runUntilDone(30*time.Second, 500)
	starts := w.fleet.Starts()
	require.Len(t, starts, 7)
	// The first start after the headnode's is the canary: alone.
	canary := starts[1]
	for _, st := range starts[2:] {
		assert.False(t, st.At.Equal(canary.At), "%s started with the canary %s", st.Server, canary.Server)
		for _, id := range st.Offline {
			assert.NotEqual(t, canary.Server, id, "%s started while the canary %s was still rebooting", st.Server, canary.Server)
		}
	}
}

// Point 12: a held pass computed the next window over 400 days every
// pass; the answer is cached, so a held plan's pass does not grow with
// the search horizon.
func BenchmarkHeldPassNextWindow(b *testing.B) {
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	o := opts()
	o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}, Expect: 2 * time.Hour}
	p, _, err := plan.Create(servers(0, 20), o)
	if err != nil {
		b.Fatal(err)
	}
	p.State = plan.StateRunning
	obs := upObs(p)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		plan.Next(p, obs, now.Add(time.Duration(i)*time.Second))
	}
}

// TestDomainLimitLiveness (rapid): racks under a per-rack limit, and one
// server down for other reasons for good, its fault kept on throughout,
// with executors killed between save and act and restarted. Every rack
// without a server down is rebooted in full (ground truth: each of its
// servers rebooted once and done), whatever the order of the plan: a
// domain limit never stalls another domain; while a reboot of the held
// rack is kept from starting, the plan says what it waits for.
func TestDomainLimitLiveness(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		nRacks := rapid.IntRange(2, 4).Draw(t, "racks")
		per := rapid.IntRange(1, 4).Draw(t, "perRack")
		fs := racks(nRacks, per, time.Duration(rapid.IntRange(1, 5).Draw(t, "boot"))*time.Minute)
		down := rapid.IntRange(0, len(fs)-1).Draw(t, "down")
		o := opts()
		o.Concurrency = plan.Count(rapid.IntRange(2, 4).Draw(t, "concurrency"))
		o.FailureBudget = plan.Count(len(fs))
		o.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: rapid.IntRange(1, 2).Draw(t, "perRackLimit")}}
		onViews = rapid.Bool().Draw(t, "views")
		defer func() { onViews = false }()
		w := newWorld(t, fs, "", o)
		w.fleet.SetDown(fs[down].UUID, true)
		ff := &flakyFleet{Fleet: w.fleet}
		var p plan.Plan
		for i := 0; i < 150; i++ {
			switch rapid.IntRange(0, 9).Draw(t, "fault") {
			case 0:
				ff.failNext = true
			case 1:
				w.exec = w.newExec()
			}
			w.exec.Fleet = ff
			_, _ = w.exec.Pass(w.ctx, w.uuid)
			p, _ = w.store.Get(w.ctx, w.uuid)
			w.clk.Advance(time.Minute)
		}
		held := fs[down].Labels["rack"]
		reboots := w.fleet.Reboots()
		for _, r := range p.Reboots {
			if r.Labels["rack"] == held {
				continue
			}
			if r.Step != plan.StepDone || reboots[r.ServerUUID] != 1 {
				t.Fatalf("%s in %s (no server down there) is %s, rebooted %d times; %s is down:\n%s",
					r.ServerHostname, r.Labels["rack"], r.Step, reboots[r.ServerUUID], held, plan.Table(p))
			}
		}
		// Waiting says why a reboot the plan would start did not start
		// (Plan.Waiting): while one is kept from starting, it names the
		// held rack. When every reboot has started, the plan may still be
		// unfinished (the down server's own reboot waits for its services
		// until ServicesTimeout), and Waiting is then empty: nothing is
		// kept from starting (seed 7297314518038209312).
		kept := false
		for _, r := range p.Reboots {
			kept = kept || r.Step == plan.StepPending
		}
		if kept && !strings.Contains(p.Waiting, "rack "+held) {
			t.Fatalf("a reboot is kept from starting and the plan waits without naming rack %s: %q\n%s", held, p.Waiting, plan.Table(p))
		}
	})
}

// Issue 40 point 1: Waiting always names what a reboot waits for. A
// reboot parked in wait_headnode because the headnode's services never
// came back had an empty Waiting (the plan looked idle for an hour).
func TestRegression40WaitingNamesHeadnode(t *testing.T) {
	fs := fleetServers(1, 2, time.Minute)
	fs[0].NeverUp = true
	o := opts()
	o.FailureBudget = plan.Count(2)
	w := newWorld(t, fs, "", o)
	named := false
	for i := 0; i < 120; i++ {
		p := w.pass()
		for _, r := range p.Reboots {
			if r.Step == plan.StepWaitHead {
				require.Contains(t, p.Waiting, "headnode", plan.Table(p))
				named = true
			}
		}
		w.clk.Advance(time.Minute)
	}
	assert.True(t, named, "no reboot waited for the headnode")
}

// The small-sample rule's edge (TestReview37_TwoSlowRebootsStallWindowedPlan):
// with nine reboots done, all longer than any window, the estimate rests
// on too few to hold the plan for good and reboots start; with ten it is
// decisive: the plan waits, says why and what to do, and the ETA is never.
func TestEstimateHoldsForGoodFromTenReboots(t *testing.T) {
	now := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC) // a daily 22:00-23:00 window opens
	for _, n := range []int{2, 9, 10, 11} {
		o := opts()
		o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}}
		took := make([]time.Duration, n)
		for i := range took {
			took[i] = 2 * time.Hour
		}
		p := doneAt(t, o, 20, took, now)
		q, acts := plan.Next(p, upObs(p), now)
		if n < 10 {
			assert.NotEmpty(t, acts, "%d reboots done held the plan for good: %s", n, q.Waiting)
			continue
		}
		assert.Empty(t, acts, "%d reboots done of 2 h each, 1-hour windows", n)
		assert.Contains(t, q.Waiting, "no maintenance window is open for 2h0m0s")
		assert.Contains(t, plan.Summarize(q, now).Line(10), "ETA never")
	}
}
