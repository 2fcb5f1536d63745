package plan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newWorldAt is newWorld with the clock starting at start.
func newWorldAt(t tb, start time.Time, fs []fake.FleetServer, o plan.CreateOptions) *world {
	w := &world{t: t, ctx: context.Background(), clk: fake.NewClock(start), store: fake.NewPlanStore(), uuid: o.UUID}
	w.fleet = fake.NewFleet(w.clk.Now, "", fs...)
	p, _, err := plan.Create(w.fleet.Servers(), o)
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	require.NoError(t, w.store.Create(w.ctx, p))
	w.exec = w.newExec()
	return w
}

func mustLoc(t *testing.T, name string) *time.Location {
	l, err := time.LoadLocation(name)
	require.NoError(t, err)
	return l
}

func TestParseWeekly(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"Mon-Fri 22:00-06:00", "Mon,Tue,Wed,Thu,Fri 22:00-06:00"},
		{"daily 01:00-05:00", "daily 01:00-05:00"},
		{"fri-mon 00:00-24:00", "Sun,Mon,Fri,Sat 00:00-24:00"},
		{"Saturday,sun 9:30-12:00", "Sun,Sat 09:30-12:00"},
	} {
		w, err := plan.ParseWeekly(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, w.String(), tc.in)
	}
	for _, bad := range []string{"", "Mon", "Mon 22:00", "Mon 25:00-01:00", "Xyz 01:00-02:00", "Mon 01:00-01:00", "Mon 24:00-01:00", "Mon 1:60-2:00", "Mon-Fri 22:00-06:00 x"} {
		_, err := plan.ParseWeekly(bad)
		assert.ErrorIs(t, err, plan.ErrWindow, bad)
	}
}

// TestWindowsDST: a weekly window in local clock times is as long as the
// clocks say: a transition inside it shortens it (spring) or lengthens it
// (autumn); a clock time that a transition skips opens the window at the
// transition; one that occurs twice is the first.
func TestWindowsDST(t *testing.T) {
	berlin, ny := mustLoc(t, "Europe/Berlin"), mustLoc(t, "America/New_York")
	for _, tc := range []struct {
		zone   string
		weekly string
		day    time.Time // a moment on the day the window starts
		start  time.Time // the window's first instant, in UTC
		length time.Duration
	}{
		{"Europe/Berlin", "Sun 01:00-05:00", time.Date(2026, 3, 22, 12, 0, 0, 0, berlin), time.Date(2026, 3, 22, 0, 0, 0, 0, time.UTC), 4 * time.Hour},
		{"Europe/Berlin", "Sun 01:00-05:00", time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), 3 * time.Hour},
		{"Europe/Berlin", "Sun 01:00-05:00", time.Date(2026, 10, 25, 12, 0, 0, 0, berlin), time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC), 5 * time.Hour},
		// 02:30 does not exist on 29 March: the window opens at 03:00 CEST.
		{"Europe/Berlin", "Sun 02:30-04:00", time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Hour},
		// 02:30 occurs twice on 25 October: the first (CEST), to 03:30 CET.
		{"Europe/Berlin", "Sun 02:30-03:30", time.Date(2026, 10, 25, 12, 0, 0, 0, berlin), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), 2 * time.Hour},
		// Overnight windows across the transition.
		{"America/New_York", "Sat 22:00-06:00", time.Date(2026, 3, 7, 23, 0, 0, 0, ny), time.Date(2026, 3, 8, 3, 0, 0, 0, time.UTC), 7 * time.Hour},
		{"America/New_York", "Sat 22:00-06:00", time.Date(2026, 10, 31, 23, 0, 0, 0, ny), time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC), 9 * time.Hour},
	} {
		w := &plan.Windows{TimeZone: tc.zone, Weekly: []string{tc.weekly}}
		day := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day(), 0, 0, 0, 0, tc.day.Location())
		ps, err := w.Periods(day, day.Add(36*time.Hour))
		require.NoError(t, err)
		require.Len(t, ps, 1, "%s %s on %s", tc.zone, tc.weekly, tc.day)
		assert.Equal(t, tc.start, ps[0].Start.UTC(), "%s %s on %s: start", tc.zone, tc.weekly, tc.day.Format(time.DateOnly))
		assert.Equal(t, tc.length, ps[0].End.Sub(ps[0].Start), "%s %s on %s: length", tc.zone, tc.weekly, tc.day.Format(time.DateOnly))
		open, closes, err := w.Open(ps[0].Start)
		require.NoError(t, err)
		assert.True(t, open)
		assert.Equal(t, ps[0].End, closes)
		open, _, _ = w.Open(ps[0].End)
		assert.False(t, open, "closed at its end")
	}
}

// TestWindowsMergeAndRanges: windows that touch or overlap are one period;
// absolute ranges add to the weekly ones; NextOpen skips periods too short.
func TestWindowsMergeAndRanges(t *testing.T) {
	w := &plan.Windows{Weekly: []string{"Mon 22:00-24:00", "Tue 00:00-02:00"},
		Ranges: []plan.Range{{Start: time.Date(2026, 1, 7, 10, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 7, 10, 30, 0, 0, time.UTC)}}}
	ps, err := w.Periods(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 8, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Len(t, ps, 2)
	assert.Equal(t, time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC), ps[0].Start)
	assert.Equal(t, time.Date(2026, 1, 6, 2, 0, 0, 0, time.UTC), ps[0].End)
	from := time.Date(2026, 1, 6, 3, 0, 0, 0, time.UTC)
	next, ok, err := w.NextOpen(from, 10*time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, time.Date(2026, 1, 7, 10, 0, 0, 0, time.UTC), next, "the range is long enough")
	next, _, _ = w.NextOpen(from, time.Hour)
	assert.Equal(t, time.Date(2026, 1, 12, 22, 0, 0, 0, time.UTC), next, "the range is too short for an hour")
	end, ok, _ := w.Finish(from, 4*time.Hour)
	assert.True(t, ok)
	// 30 min on Wednesday, 3.5 h of the next Monday night's 4.
	assert.Equal(t, time.Date(2026, 1, 13, 1, 30, 0, 0, time.UTC), end)
}

// TestWindowHoldsStarts: outside its windows the plan starts nothing and
// says until when; it starts when the window opens, never a reboot that
// cannot finish before the window closes (the longest reboot done so far),
// and a reboot that started finishes after the window closed.
func TestWindowHoldsStarts(t *testing.T) {
	start := time.Date(2026, 1, 5, 21, 0, 0, 0, time.UTC) // Monday 21:00
	o := opts()
	o.Concurrency = plan.Count(1)
	o.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}}
	fs := fleetServers(0, 6, 20*time.Minute) // about 21 minutes each
	w := newWorldAt(t, start, fs, o)
	p := w.pass()
	assert.Equal(t, plan.StepPending, p.Reboots[0].Step)
	assert.Equal(t, "waiting: outside the maintenance windows until Mon 2026-01-05 22:00 UTC", p.Waiting)
	for w.clk.Now().Before(time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC)) {
		w.clk.Advance(30 * time.Second)
		p = w.pass()
	}
	// 22:00-23:00: the first (21 min, nothing known) and the second (the
	// first took ~21 min, fits before 23:00); not a third at ~22:43.
	done := 0
	for _, r := range p.Reboots {
		if r.Step == plan.StepDone {
			done++
		}
	}
	assert.Equal(t, 2, done, plan.Table(p))
	assert.Contains(t, p.Waiting, "waiting: outside the maintenance windows until Tue 2026-01-06 22:00 UTC")
	for _, st := range w.fleet.Starts() {
		open, closes, err := p.Windows.Open(st.At)
		require.NoError(t, err)
		assert.True(t, open, "start at %s", st.At)
		assert.True(t, st.At.Add(21*time.Minute).Before(closes) || st.At.Equal(start), "start at %s closes %s", st.At, closes)
	}
	final := w.runUntilDone(time.Minute, 100000)
	assert.Equal(t, plan.StateComplete, final.State)
	for _, st := range w.fleet.Starts() {
		open, _, _ := final.Windows.Open(st.At)
		assert.True(t, open, "start at %s", st.At)
	}
}

// TestWindowDSTDecides: a reboot that takes 3.5 hours fits a Sunday window
// from 01:00 to 05:00 (Europe/Berlin) on an ordinary Sunday and on the
// night the clocks go back, not on the night they go forward.
func TestWindowDSTDecides(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	p, _, err := plan.Create(servers(0, 2), opts())
	require.NoError(t, err)
	p.State = plan.StateRunning
	p.Windows = &plan.Windows{TimeZone: "Europe/Berlin", Weekly: []string{"Sun 01:00-05:00"}, Expect: 3*time.Hour + 30*time.Minute}
	obs := plan.Observations{Servers: map[string]plan.ServerObs{"u000": {ServicesUp: true}, "u001": {ServicesUp: true}}, HeadnodeServicesUp: true}
	for _, tc := range []struct {
		day  int
		mon  time.Month
		fits bool
	}{{22, time.March, true}, {29, time.March, false}, {25, time.October, true}} {
		now := time.Date(2026, tc.mon, tc.day, 1, 0, 0, 0, berlin)
		q, acts := plan.Next(p, obs, now)
		assert.Equal(t, tc.fits, len(acts) > 0, "%s: %s", now, q.Waiting)
		if !tc.fits {
			assert.Contains(t, q.Waiting, "the maintenance window closes at Sun 2026-03-29 05:00 CEST, too soon for a reboot of 3h30m0s")
			assert.Contains(t, q.Waiting, "next window: Sun 2026-04-05 01:00 CEST")
		}
	}
}

// TestETAInWindows: the ETA spreads the work left over the open windows.
func TestETAInWindows(t *testing.T) {
	p, _, err := plan.Create(servers(0, 4), opts())
	require.NoError(t, err)
	p.State = plan.StateRunning
	t0 := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC)
	t1 := t0.Add(30 * time.Minute)
	p.Reboots[0].Step, p.Reboots[0].StartedAt, p.Reboots[0].OperationalAt = plan.StepDone, &t0, &t1
	// 3 left, 30 min each, concurrency 2: 45 min of work.
	now := time.Date(2026, 1, 5, 22, 30, 0, 0, time.UTC)
	assert.Equal(t, 45*time.Minute, plan.Summarize(p, now).ETA)
	p.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}}
	// 30 min tonight, 15 min tomorrow from 22:00.
	assert.Equal(t, 24*time.Hour-15*time.Minute, plan.Summarize(p, now).ETA)
	assert.Equal(t, 24*time.Hour-15*time.Minute, plan.FullView(p).SummaryAt(now).ETA)
}

func TestRampLimit(t *testing.T) {
	ramp := []int{1, 5, 40}
	for _, tc := range []struct{ done, conc, want int }{
		{0, 50, 1}, {1, 50, 5}, {5, 50, 5}, {6, 50, 40}, {45, 50, 40}, {46, 50, 50}, {0, 3, 1}, {3, 3, 3}, {100, 3, 3},
	} {
		assert.Equal(t, tc.want, plan.RampLimit(ramp, tc.conc, tc.done), "done %d conc %d", tc.done, tc.conc)
	}
	l, err := plan.ParseRamp("1,5,20%")
	require.NoError(t, err)
	assert.Equal(t, []plan.Limit{plan.Count(1), plan.Count(5), plan.Percent(20)}, l)
	for _, bad := range []string{"", "0", "1,,2", "1,101%", "x"} {
		_, err := plan.ParseRamp(bad)
		assert.ErrorIs(t, err, plan.ErrPolicy, bad)
	}
	o := opts()
	o.Ramp = l
	p, _, err := plan.Create(servers(0, 10), o)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 5, 5}, p.Ramp, "20% of 10 is 2, no fewer than the 5 before")
	p.Ramp = []int{5, 1}
	_, err = plan.Decode(must(plan.Encode(p)))
	assert.ErrorIs(t, err, plan.ErrPolicy, "a ramp that goes down")
}

// TestRampGroundTruth: the servers offline when each job started never
// reach the ramp's limit for the reboots done by then (ground truth: jobs
// ended, at least as many as the plan saw done).
func TestRampGroundTruth(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(6)
	o.Ramp = []plan.Limit{plan.Count(1), plan.Count(2), plan.Count(4)}
	w := newWorld(t, fleetServers(0, 20, 2*time.Minute), "", o)
	ended := map[int]int{} // start index -> jobs ended then
	var final plan.Plan
	for i := 0; i < 10000; i++ {
		n := len(w.fleet.Starts())
		e := w.fleet.JobsEnded()
		final = w.pass()
		for k := n; k < len(w.fleet.Starts()); k++ {
			ended[k] = e
		}
		if !final.Unfinished() {
			break
		}
		w.clk.Advance(10 * time.Second)
	}
	require.Equal(t, plan.StateComplete, final.State)
	sawRamp := map[int]bool{}
	for k, st := range w.fleet.Starts() {
		lim := plan.RampLimit(final.Ramp, final.Concurrency, ended[k])
		assert.Less(t, len(st.Offline), lim, "start %d (%s): %d offline, %d ended", k, st.Server, len(st.Offline), ended[k])
		sawRamp[len(st.Offline)+1] = true
	}
	assert.True(t, sawRamp[6], "reached the full concurrency after the ramp")
	order := startOrder(w.snaps)
	require.Len(t, order, 20)
}

// TestRampBadPlatform: every reboot fails; the ramp keeps them one at a
// time and the failure budget stops the plan: budget+1 servers hurt.
func TestRampBadPlatform(t *testing.T) {
	for _, budget := range []int{0, 2} {
		o := opts()
		o.Concurrency = plan.Count(5)
		o.FailureBudget = plan.Count(budget)
		o.Ramp = []plan.Limit{plan.Count(1), plan.Count(5)}
		fs := fleetServers(0, 20, time.Minute)
		for i := range fs {
			fs[i].FailJob = true
		}
		w := newWorld(t, fs, "", o)
		final := w.runUntilDone(10*time.Second, 10000)
		assert.Equal(t, plan.StateFailed, final.State)
		assert.Len(t, w.fleet.JobsCreated(), budget+1, "budget %d", budget)
		for _, st := range w.fleet.Starts() {
			assert.Empty(t, st.Offline, "one at a time")
		}
	}
}

func racks(n, perRack int, d time.Duration) []fake.FleetServer {
	fs := fleetServers(0, n*perRack, d)
	for i := range fs {
		fs[i].Labels = map[string]string{"rack": fmt.Sprintf("r%02d", i/perRack), "zone": fmt.Sprintf("z%d", i/perRack%2)}
	}
	return fs
}

func TestParseDomainLimit(t *testing.T) {
	d, err := plan.ParseDomainLimit("rack=1")
	require.NoError(t, err)
	assert.Equal(t, plan.DomainLimit{Label: "rack", Max: 1}, d)
	d, err = plan.ParseDomainLimit("zone=10%")
	require.NoError(t, err)
	assert.Equal(t, plan.DomainLimit{Label: "zone", Max: 10, Percent: true}, d)
	assert.Equal(t, 1, d.Of(5), "at least 1")
	assert.Equal(t, 3, d.Of(39))
	for _, bad := range []string{"rack", "=1", "rack=0", "rack=x", "zone=200%"} {
		_, err := plan.ParseDomainLimit(bad)
		assert.ErrorIs(t, err, plan.ErrPolicy, bad)
	}
}

// TestDomainOrderInterleaves: with a per-rack limit the plan's order
// alternates racks (and zones), so consecutive reboots do not wait for
// each other.
func TestDomainOrderInterleaves(t *testing.T) {
	o := opts()
	o.DomainLimits = []plan.DomainLimit{{Label: "zone", Max: 50, Percent: true}, {Label: "rack", Max: 1}}
	fl := fake.NewFleet(time.Now, "", racks(4, 3, time.Minute)...)
	p, _, err := plan.Create(fl.Servers(), o)
	require.NoError(t, err)
	var got []string
	for _, r := range p.Reboots {
		got = append(got, r.Labels["zone"]+"/"+r.Labels["rack"])
	}
	assert.Equal(t, []string{"z0/r00", "z1/r01", "z0/r02", "z1/r03", "z0/r00", "z1/r01", "z0/r02", "z1/r03", "z0/r00", "z1/r01", "z0/r02", "z1/r03"}, got)
}

// TestDomainLimitGroundTruth: at every job start, the servers offline in
// the server's rack (ground truth, down for any reason included) are
// below the rack's limit, and in its zone below the zone's; servers down
// for other reasons hold their rack only.
func TestDomainLimitGroundTruth(t *testing.T) {
	for _, views := range []bool{false, true} {
		onViews = views
		o := opts()
		o.Concurrency = plan.Count(8)
		o.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: 1}, {Label: "zone", Max: 25, Percent: true}}
		fs := racks(6, 4, 3*time.Minute)
		w := newWorld(t, fs, "", o)
		w.fleet.SetDown(fs[5].UUID, true) // rack r01 has one down already
		labels := map[string]map[string]string{}
		for _, s := range fs {
			labels[s.UUID] = s.Labels
		}
		var p plan.Plan
		for i := 0; i < 200; i++ {
			p = w.pass()
			w.clk.Advance(10 * time.Second)
		}
		starts := w.fleet.Starts()
		require.NotEmpty(t, starts)
		for _, st := range starts {
			if labels[st.Server]["rack"] == "r01" {
				assert.Equal(t, fs[5].UUID, st.Server, "rack r01 has a server down: only its own reboot may start there")
			}
			for _, l := range []struct {
				label string
				lim   int
			}{{"rack", 1}, {"zone", 3}} {
				n := 0
				for _, id := range st.Offline {
					if labels[id][l.label] == labels[st.Server][l.label] {
						n++
					}
				}
				assert.Less(t, n, l.lim, "%s at %s: %d offline in %s %s", st.Server, st.At, n, l.label, labels[st.Server][l.label])
			}
		}
		assert.Contains(t, p.Waiting, "waits for rack r01: 1 server(s) offline there, limit 1")
		w.fleet.SetDown(fs[5].UUID, false)
		final := w.runUntilDone(10*time.Second, 10000)
		assert.Equal(t, plan.StateComplete, final.State)
		onViews = false
	}
}

// TestDomainLimitOnBolt: passes on views of the bbolt store, which gives
// no domain table: the Executor reads it once and the limits hold.
func TestDomainLimitOnBolt(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(8)
	o.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: 1}}
	fs := racks(12, 4, 3*time.Minute)
	w := newWorld(t, fs, "", o)
	// Down for other reasons, in rack r11, not loaded by the first views:
	// only r11 waits (without the table it would hold every rack).
	w.fleet.SetDown(fs[47].UUID, true)
	st, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer st.Close()
	p, err := w.store.Get(w.ctx, w.uuid)
	require.NoError(t, err)
	p.Version = ""
	require.NoError(t, st.Create(w.ctx, p))
	exec := &plan.Executor{Fleet: w.fleet, Store: st, Now: w.clk.Now}
	rack := map[string]string{}
	for _, s := range fs {
		rack[s.UUID] = s.Labels["rack"]
	}
	for i := 0; i < 10000; i++ {
		v, err := exec.Pass(w.ctx, w.uuid)
		require.NoError(t, err)
		require.False(t, v.Full(), "passes on views")
		if !v.Unfinished() {
			assert.Equal(t, plan.StateComplete, v.State)
			break
		}
		if i == 20 {
			assert.Len(t, w.fleet.Starts(), 7, "7 racks started (concurrency 8, one server down elsewhere)")
			w.fleet.SetDown(fs[47].UUID, false)
		}
		w.clk.Advance(10 * time.Second)
	}
	require.Len(t, w.fleet.Starts(), 48)
	for _, s := range w.fleet.Starts() {
		for _, id := range s.Offline {
			assert.NotEqual(t, rack[s.Server], rack[id], "%s started with %s offline in its rack", s.Server, id)
		}
	}
}

// TestBlockingCondition: a failing condition holds every start, its output
// in the plan for watch; a stale or missing result holds it too; in-flight
// reboots go on.
func TestBlockingCondition(t *testing.T) {
	p, _, err := plan.Create(servers(0, 3), opts())
	require.NoError(t, err)
	p.State = plan.StateRunning
	p.Conditions = []plan.Condition{{Name: "no-alerts", Command: []string{"check-alerts"}}}
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	obs := plan.Observations{Servers: map[string]plan.ServerObs{"u000": {ServicesUp: true}, "u001": {ServicesUp: true}, "u002": {ServicesUp: true}},
		HeadnodeServicesUp: true}
	q, acts := plan.Next(p, obs, now)
	assert.Empty(t, acts)
	assert.Equal(t, "waiting: blocking condition no-alerts has not been checked", q.Waiting)

	obs.Conditions = map[string]plan.ConditionResult{"no-alerts": {OK: false, Output: "ALERT DiskFull on cn001\x1b[31m\n", At: now.Add(-10 * time.Second)}}
	q, acts = plan.Next(p, obs, now)
	assert.Empty(t, acts)
	assert.Equal(t, "waiting: blocking condition no-alerts fails (checked 10s ago)", q.Waiting)
	assert.Equal(t, "ALERT DiskFull on cn001?[31m", q.WaitingOutput)
	assert.Contains(t, plan.Summarize(q, now).Line(10), "no-alerts fails")

	obs.Conditions["no-alerts"] = plan.ConditionResult{OK: true, At: now.Add(-3 * time.Minute)}
	q, acts = plan.Next(p, obs, now)
	assert.Empty(t, acts)
	assert.Equal(t, "waiting: blocking condition no-alerts was last checked 3m0s ago (at most 2m0s)", q.Waiting)

	obs.Conditions["no-alerts"] = plan.ConditionResult{OK: true, At: now}
	q, acts = plan.Next(p, obs, now)
	assert.Len(t, acts, 2)
	assert.Empty(t, q.Waiting)
	assert.Empty(t, q.WaitingOutput)

	// In flight, the condition fails: the reboots go on, nothing new.
	obs.Conditions["no-alerts"] = plan.ConditionResult{OK: false, Output: "firing", At: now}
	obs.Jobs = map[string]plan.JobObs{acts[0].JobUUID: {Exists: true}, acts[1].JobUUID: {Exists: true}}
	q2, acts := plan.Next(q, obs, now.Add(time.Second))
	assert.Empty(t, acts)
	assert.Equal(t, plan.StepJob, q2.Reboots[0].Step)
	assert.Equal(t, plan.StepPending, q2.Reboots[2].Step)
	assert.True(t, strings.HasPrefix(q2.Waiting, "waiting: blocking condition no-alerts fails"), q2.Waiting)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
