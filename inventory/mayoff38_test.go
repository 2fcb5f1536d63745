package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// TestMayBeOffSlotHeldUntilShutdownCanLand (review 38 round 1, the
// accounting half of TestReview38_MayBeOffFollowUpPowerOffDuringNextReboot):
// at concurrency 1, cn0's BMC accepts a soft power-off whose OS shutdown
// takes 104 s, then times out every power-off; the job ends after its
// one-minute timeout saying the server may be off, while cn0 still runs
// and passes its health check. The shutdown lands 45 s after the job
// ended. Against ground truth: never two servers off at once (the plan
// counts cn0's slot offline until a health check begun ShutdownMax after
// its last power-off passes), no power-off reaches cn0's BMC once its job
// ended, and the fleet powers cn0 on again after the late shutdown, then
// settles it. Old code: the slot was freed 36 s after the job ended
// (HealthMaxAge + StaleReads), cn1's reboot started, and cn0's shutdown
// landed during it: 2 servers off at concurrency 1; and the fleet kept
// sending cn0 hard power-offs after its job ended.
func TestMayBeOffSlotHeldUntilShutdownCanLand(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	w.cfg.JobTimeout = time.Minute
	w.budget = 1 // cn0's failure does not stop the plan
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, SoftDelay: 104 * time.Second})
	require.Len(t, b.offs, 1, "cn0's soft power-off was sent")
	require.NoError(t, b.offs[0].err, "and accepted")
	softAt := w.clk.Real()
	b.mode = bmcOffHung // every later power-off times out, not applied
	var ended time.Time
	var offsAtEnd int
	for i := 0; i < 300 && ended.IsZero(); i++ {
		w.run(ids, time.Second)
		jobs, err := w.f.Jobs()
		require.NoError(t, err)
		for _, j := range jobs {
			if j.Server == ids[0] && j.Over() {
				ended, offsAtEnd = w.clk.Real(), len(b.offs)
				assert.Contains(t, j.Error, "may be off")
			}
		}
	}
	require.False(t, ended.IsZero(), "cn0's job ended")
	require.True(t, b.p.HardwareOn(), "cn0 still runs when its job ends")
	require.True(t, softAt.Add(104*time.Second).After(ended), "its shutdown lands after its job ended")
	w.run(ids, 10*time.Minute) // w.check: at most 1 server off at every instant (ground truth)
	assert.Len(t, b.offs, offsAtEnd, "no power-off reached cn0's BMC once its job ended")
	var wentOff bool
	for _, tc := range b.p.Truth() {
		wentOff = wentOff || !tc.On && tc.At.After(ended)
	}
	assert.True(t, wentOff, "cn0's shutdown landed after its job ended")
	assert.True(t, b.p.HardwareOn(), "the fleet powered cn0 on again")
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.False(t, h.needsKeeping(), "cn0's power cycle settled (%s)", h.Phase)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	var cn1Done bool
	for _, j := range jobs {
		cn1Done = cn1Done || j.Server == ids[1] && j.State == JobDone
	}
	assert.True(t, cn1Done, "cn1 was rebooted once cn0's slot was free: %+v", jobs)
}

// TestMayBeOffCycleDroppedOnceShutdownCannotLand: cn0's OS ignores the
// soft power-off the BMC accepted, and every hard power-off times out
// until its job ends saying the server may be off. The fleet sends it no
// power-off after that; once cn0 reads on past ShutdownMax after the last
// power-off (nothing sent before can take effect any more), the fleet
// drops what is left of the power cycle: the server is settled. Old code (the follow-up kept the cycle and
// sent hard power-offs once the BMC answered again): cn0 was powered off
// after its job had ended.
func TestMayBeOffCycleDroppedOnceShutdownCannotLand(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.cfg.JobTimeout = time.Minute
	b := w.softOffSent(t, ids, fake.PowerConfig{Lag: time.Second, IgnoreSoft: true})
	require.NotEmpty(t, b.offs, "cn0's soft power-off was sent")
	b.mode = bmcOffHung
	var offsAtEnd int
	for i := 0; i < 300; i++ {
		w.run(ids, time.Second)
		jobs, err := w.f.Jobs()
		require.NoError(t, err)
		if len(jobs) == 1 && jobs[0].Over() {
			offsAtEnd = len(b.offs)
			break
		}
	}
	require.NotZero(t, offsAtEnd, "cn0's job ended")
	b.mode = bmcOK // every power-off would now be applied
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	require.True(t, h.needsKeeping(), "the fleet keeps cn0's power cycle right after its job ended")
	w.run(ids, 5*time.Minute)
	assert.Len(t, b.offs, offsAtEnd, "no power-off reached cn0's BMC once its job ended")
	for _, tc := range b.p.Truth() {
		assert.True(t, tc.On, "cn0 was powered off at %s", tc.At)
	}
	h, err = w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.False(t, h.needsKeeping(), "cn0's power cycle was dropped once no power-off could land (%s)", h.Phase)
	assert.Equal(t, "on", h.Phase)
	assert.Equal(t, power.StateOn, b.p.Current())
}
