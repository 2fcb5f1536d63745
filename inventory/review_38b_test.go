package inventory

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
)

// TestReview38_AbandonDuringMayBeOffWindow (review 38 round 2): cn0's BMC
// accepts a soft power-off whose OS shutdown takes 40 s, then hangs on every
// power-off. The operator abandons cn0 at once (it still runs and passes its
// health check). The fleet frees cn0's slot at that instant (an abandoned
// server never counts against the concurrency, observe.go), although the
// power-off the fleet sent may still land: it does, 40 s later, and the
// fleet never powers cn0 on again (abandoned). Ground truth (w.check, every
// second; the world does not exclude cn0 after the abandon, since the late
// power-off is the fleet's, not the operator's): at concurrency 1, cn1 or
// cn2 is powered off while cn0 is off.
func TestReview38_AbandonDuringMayBeOffWindow(t *testing.T) {
	w, ids := newWorld(t, 3, 1)
	w.budget = 3
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 40 * time.Second})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	require.True(t, b.p.HardwareOn(), "cn0 still runs")
	b.mode = bmcOffHung
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, 20*time.Minute) // fails in w.check: 2 servers off at once, concurrency 1
}

// TestReview38_PowerOffAfterJobTimedOutWhileUndraining (review 38 round 2):
// cn0's OS ignores the soft power-off its BMC accepted, and its BMC answers
// busy to every hard power-off until the job gives up on the power cycle
// (JobTimeout after the request: "the server may be off", request
// released). The job then undrains, and its undrain command hangs; the BMC
// answers again. Claim (doc.go; the change's own words): once a job has
// given up on its power cycle, nothing powers its server off again, the
// fleet only powers it on. Current code: gated.Off asks only whether the
// job is still the server's live job (cycleJobLive), and a job that timed
// out stays live while it undrains, so the follow-up sends a hard
// power-off that the BMC applies: cn0 goes off after its job decided to
// leave its power cycle to the fleet, while it is being put back in
// service.
func TestReview38_PowerOffAfterJobTimedOutWhileUndraining(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	w.cfg.JobTimeout = time.Minute
	w.cmdMode, w.drained = map[string]int{}, map[string]bool{}
	w.inv.Servers[0].Drain = []string{"drain", id}
	w.inv.Servers[0].Undrain = []string{"undrain", id}
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, IgnoreSoft: true})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	b.mode = bmcOffBusy
	w.cmdMode[id] = cmdHang // its undrain hangs
	gaveUp := -1
	for i := 0; i < 300 && gaveUp < 0; i++ {
		w.run(ids, time.Second)
		jobs, err := w.f.Jobs()
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		if strings.Contains(jobs[0].Error, "may be off") {
			gaveUp = len(b.offs)
			require.Equal(t, JobUndraining, jobs[0].State)
		}
	}
	require.GreaterOrEqual(t, gaveUp, 0, "cn0's job gave up on its power cycle")
	b.mode = bmcOK
	w.run(ids, 3*time.Minute)
	for k, o := range b.offs[gaveUp:] {
		assert.False(t, o.applied, "power-off %d applied after cn0's job gave up on its power cycle (the fleet only powers it on)", gaveUp+k)
	}
	for _, tc := range b.p.Truth() {
		assert.True(t, tc.On, "cn0 went off at %s", tc.At)
	}
}

// TestReview38_MaybeSelfDropsCycleOfServerThatIsOff (review 38 round 2):
// cn0's job powered it off (ground truth: off), then its BMC answered busy
// to everything and the executor restarted unable to tell whether it runs
// on cn0 (Options.MaybeSelf: a hostname that matches none, names that do
// not resolve). (rebootctl's refuseMaybeSelf refuses to start while a
// live step of an unfinished plan names such a server; the library takes
// Options.MaybeSelf as given: reachability through rebootctl unproven.)
// The job's decision treats "may be this machine" like "is
// this machine" (job.go: in.Self || in.MaybeSelf -> actWithdrawSelf):
// "the executor runs, so the server is on": the power cycle is dropped,
// OffMaybe cleared, the job ends, and nothing ever powers cn0 on again
// once its BMC answers. Ground truth: cn0 stays off for good with no job
// and no power cycle of the fleet on it.
func TestReview38_MaybeSelfDropsCycleOfServerThatIsOff(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	b := w.bmcs[id]
	w.open()
	defer func() { w.close() }()
	w.newPlan()
	for i := 0; i < 300 && b.p.HardwareOn(); i++ {
		w.run(ids, time.Second)
	}
	require.False(t, b.p.HardwareOn(), "cn0's job powered it off")
	b.mode = bmcBusy // the power-on does not get through
	w.run(ids, 5*time.Second)
	require.False(t, b.p.HardwareOn())
	w.close()
	w.open() // restarted, and it cannot tell whether it runs on cn0
	w.f.opts.MaybeSelf = []string{id}
	b.mode = bmcOK
	w.run(ids, 15*time.Minute) // w.check: "off and no job of the fleet is live on it"
	assert.True(t, b.p.HardwareOn(), "the fleet powers cn0 on again: it may not be this machine, and it reads off")
}

// TestReview38_HeadnodeServicesUpWhileItsShutdownMayLand (review 38 round
// 2): the headnode's BMC accepts a soft power-off whose OS shutdown takes
// 100 s, then times out every power-off; the headnode's job ends after its
// one-minute timeout saying it may be off. The fleet counts the headnode
// itself down (its power-off may still land: offLanded), but tells the
// plan that the headnode's services are up (Observe: HeadnodeServicesUp =
// healthy && !isBusy, no offLanded), so every other reboot that waits for
// the headnode's services starts, and the headnode goes off under it.
// Ground truth: the headnode's hardware is bound to go off (GoingOff)
// while the fleet says its services are up.
func TestReview38_HeadnodeServicesUpWhileItsShutdownMayLand(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.cfg.JobTimeout = time.Minute
	w.inv.Servers[0].Headnode = true
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 100 * time.Second})
	require.Len(t, b.offs, 1, "the headnode's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	b.mode = bmcOffHung
	ended := false
	for i := 0; i < 120 && !ended; i++ {
		w.run(ids, time.Second)
		jobs, err := w.f.Jobs()
		require.NoError(t, err)
		ended = len(jobs) == 1 && jobs[0].Over()
	}
	require.True(t, ended, "the headnode's job ended")
	require.True(t, b.p.HardwareOn() && b.p.GoingOff(), "the headnode runs, its shutdown still to land")
	p, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	obs, err := w.f.Observe(w.ctx(), p)
	require.NoError(t, err)
	require.True(t, obs.Servers[ids[0]].Down, "the fleet counts the headnode down (its power-off may land)")
	assert.False(t, obs.HeadnodeServicesUp, "the fleet says the headnode's services are up while its shutdown is still to land")
}
