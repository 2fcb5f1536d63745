package inventory

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
)

// newWorld is a world of n honest servers for scenario tests.
func newWorld(t *testing.T, n, conc int) (*world, []string) {
	w := &world{t: t, clk: fake.NewClock(time.Time{}), bmcs: map[string]*advBMC{}, store: fake.NewPlanStore(),
		cancelAt: map[string]int{}, jobStart: map[string]int{}, offMark: map[string]int{}, conc: conc, bootTime: 5 * time.Second,
		cfg: plan.Config{DrainTimeout: 10 * time.Minute, JobTimeout: 10 * time.Minute, ServicesTimeout: 10 * time.Minute}}
	w.path = filepath.Join(t.TempDir(), "fleet.db")
	var ids []string
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		ids = append(ids, id)
		w.bmcs[id] = &advBMC{p: fake.NewPower(w.clk.Real, fake.PowerConfig{Lag: time.Second, SoftDelay: 5 * time.Second})}
		w.inv.Servers = append(w.inv.Servers, Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1",
			BMC: BMC{Redfish: "https://bmc" + id, Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"}})
	}
	sort.Strings(ids)
	return w, ids
}

// run advances the world by d in steps, passing and stepping every server.
func (w *world) run(ids []string, d time.Duration) {
	for end := w.clk.Real().Add(d); w.clk.Real().Before(end); w.clk.Advance(time.Second) {
		w.pass()
		for _, id := range ids {
			w.step(id)
		}
		w.check()
	}
}

// TestFailedPowerOnIsRetried: the power-on of a reboot answers busy, and
// the executor is killed between writing the power-on status and sending
// the power-on: the server is powered on all the same, and the job
// finishes (FINISHED) only once it reads on, not when the power-on was
// decided (issue 26, A1; old code: the job saw Client.Done, nobody powered
// the server on again, the server stayed off for good).
func TestFailedPowerOnIsRetried(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	p := w.bmcs[id].p
	w.open()
	defer func() { _ = w.f.Close() }()
	w.newPlan()
	p.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultBusy})
	killed := false
	for i := 0; i < 600 && !killed; i++ {
		// Kill at the first power-on, after its status write.
		if w.killAt == 0 && w.lastPoint != "" && strings.HasPrefix(w.lastPoint, "job rebooting") {
			w.killAt = -1
		}
		w.pass()
		w.step(id)
		w.clk.Advance(time.Second)
		for _, c := range p.Calls() {
			if c.Op == fake.OpOn && !killed {
				killed = true
			}
		}
	}
	require.True(t, killed, "a power-on was tried")
	// The second power-on: kill the executor right before it is sent.
	w.f.opts.crash = func(point string) bool { return point == "power on "+id }
	w.run(ids, 2*time.Second)
	w.run(ids, 5*time.Minute)
	assert.True(t, p.HardwareOn(), "the server is on again")
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	j := jobs[0]
	assert.Equal(t, JobDone, j.State, j.Error)
	require.NotNil(t, j.Finished)
	var on time.Time
	for _, tc := range p.Truth() {
		if tc.On {
			on = tc.At
		}
	}
	assert.False(t, j.Finished.Before(on), "FINISHED %v is the end of the power cycle (on at %v)", j.Finished, on)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.Equal(t, plan.StateComplete, pl.State)
}

// TestNoPowerOffAfterPlanEnded: the BMC refuses the password; the plan
// gives up on the job and fails; the password is fixed afterwards; nothing
// ever powers the server off, the job ends cancelled, and the plan records
// the real cause (issue 26, A2 and B6; old code: the job kept retrying for
// job + services timeout and power-cycled the server once the password
// worked).
func TestNoPowerOffAfterPlanEnded(t *testing.T) {
	t.Run("password refused", func(t *testing.T) { noPowerOffAfterPlanEnded(t, bmcAuth, "authentication failed at the BMC") })
	t.Run("power-off refused", func(t *testing.T) { noPowerOffAfterPlanEnded(t, bmcOffBusy, "the BMC is busy") })
}

func noPowerOffAfterPlanEnded(t *testing.T, mode int, cause string) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	b := w.bmcs[id]
	b.mode = mode
	w.open()
	defer func() { _ = w.f.Close() }()
	w.newPlan()
	w.run(ids, w.cfg.JobTimeout+2*time.Minute)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.Equal(t, plan.StateFailed, pl.State, plan.Table(pl))
	assert.Contains(t, pl.Reboots[0].Error, cause)
	b.mode = bmcOK // the password is fixed
	w.close()
	w.open() // and the executor restarted
	w.run(ids, 30*time.Minute)
	for _, o := range b.offs {
		assert.False(t, o.applied, "no power-off was applied")
	}
	assert.Zero(t, b.p.Cycles())
	assert.True(t, b.p.HardwareOn())
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobCancelled, jobs[0].State)
	assert.Contains(t, jobs[0].Error, cause)
}

// TestCancelAfterPowerOffBringsServerBack: a plan cancelled after its
// job's power-off was accepted brings the server back on, then the job
// ends (issue 26, A2).
func TestCancelAfterPowerOffBringsServerBack(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	b := w.bmcs[id]
	w.open()
	defer func() { _ = w.f.Close() }()
	w.newPlan()
	for i := 0; i < 120 && len(b.offs) == 0; i++ {
		w.run(ids, time.Second)
	}
	require.NotEmpty(t, b.offs, "a power-off was sent")
	_, err := plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel)
	require.NoError(t, err)
	w.run(ids, 10*time.Minute)
	assert.True(t, b.p.HardwareOn())
	assert.Equal(t, 1, b.p.Cycles(), "one power cycle, completed")
	jobs, _ := w.f.Jobs()
	require.Len(t, jobs, 1)
	assert.True(t, jobs[0].Over(), jobs[0].State)
}

// TestOneLiveJobPerServer: a second job for a server with a live job is
// refused, and every job has its own annotation key (issue 26, A3; old
// code: both were created and shared the key "rebootctl").
func TestOneLiveJobPerServer(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer func() { _ = w.f.Close() }()
	require.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Kind: plan.ActionCreateJob, Server: ids[0], JobUUID: "job-a", PlanUUID: "p1"}))
	err := w.f.CreateJob(w.ctx(), plan.Action{Kind: plan.ActionCreateJob, Server: ids[0], JobUUID: "job-b", PlanUUID: "p2"})
	assert.ErrorIs(t, err, ErrServerBusy)
	require.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Kind: plan.ActionCreateJob, Server: ids[0], JobUUID: "job-a", PlanUUID: "p1"}), "idempotent")
	assert.NotEqual(t, jobKey("job-a"), jobKey("job-b"))
	for range 10 {
		w.step(ids[0])
	}
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	for k := range h.Annotations {
		assert.Equal(t, "reboot.metal3.io/"+jobKey("job-a"), k)
	}
}

// TestExecutorNeverPowersOffItsOwnServer: the server the executor runs on
// is rebooted through its reboot command and confirmed by a new boot ID,
// never powered off through its BMC; without a reboot command its job
// fails at once, saying why (issue 26, A4; old code: the executor powered
// its own server off and nothing powered it on).
func TestExecutorNeverPowersOffItsOwnServer(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	self := ids[0]
	boot := "boot-1"
	rebooted := 0
	w.inv.Servers[0].Reboot = []string{"systemctl", "reboot"}
	open := func() {
		w.open()
		w.f.opts.Self = self
		w.f.opts.BootID = func() (string, error) { return boot, nil }
		w.f.opts.command = func(_ context.Context, argv []string) error {
			if argv[0] == "systemctl" {
				rebooted++
				boot = fmt.Sprintf("boot-%d", rebooted+1)
			}
			return nil
		}
	}
	open()
	defer func() { _ = w.f.Close() }()
	w.newPlan()
	w.run(ids, 10*time.Minute)
	assert.Empty(t, w.bmcs[self].offs, "the executor's own server is never powered off through its BMC")
	assert.Equal(t, 1, rebooted, "rebooted once through its own command")
	assert.Equal(t, 1, w.bmcs[ids[1]].p.Cycles(), "the other server is power-cycled")
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.Equal(t, plan.StateComplete, pl.State, plan.Table(pl))

	// Without a reboot command: refused, and said why.
	w2, ids2 := newWorld(t, 1, 1)
	w2.open()
	defer func() { _ = w2.f.Close() }()
	w2.f.opts.Self = ids2[0]
	w2.newPlan()
	w2.run(ids2, time.Minute)
	assert.Empty(t, w2.bmcs[ids2[0]].offs)
	pl, err = w2.store.Get(w2.ctx(), w2.plans[0])
	require.NoError(t, err)
	assert.Equal(t, plan.StateFailed, pl.State)
	assert.Contains(t, pl.Reboots[0].Error, "runs on this server")
	_ = power.ModeSoft
}
