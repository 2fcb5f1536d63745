package inventory

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestDeadBMCStallsOnlyItsServer: at concurrency 1, one server's BMC
// refuses every login for ever. Its power-off was never sent, so its job
// is released without a power reading once it times out; the other
// server is rebooted and the plan ends; a cancelled plan ends too
// (issue 38, A.1; old code: the job waited in withdrawing for a reading
// that never came, held the slot, and the plan never ended).
func TestDeadBMCStallsOnlyItsServer(t *testing.T) {
	for _, mode := range []int{bmcAuth, bmcHung} {
		w, ids := newWorld(t, 2, 1)
		dead := ids[0]
		w.bmcs[dead].mode = mode
		w.budget = 1
		w.open()
		w.newPlan()
		w.run(ids, w.cfg.JobTimeout+5*time.Minute)
		pl, err := w.store.Get(w.ctx(), w.plans[0])
		require.NoError(t, err)
		assert.False(t, pl.Unfinished(), "mode %d: the plan ended: %s", mode, plan.Table(pl))
		assert.Equal(t, 1, w.bmcs[ids[1]].p.Cycles(), "mode %d: the other server was rebooted", mode)
		assert.True(t, w.bmcs[dead].p.HardwareOn())
		h, err := w.f.hosts.load(dead)
		require.NoError(t, err)
		if mode == bmcAuth {
			// Every login refused: no power-off was ever sent.
			assert.False(t, h.needsKeeping(), "mode %d: nothing left to reconcile on a server never powered off: %+v", mode, h)
		} else {
			// A power-off went out and timed out: it may have been
			// carried out, so the server is still reconciled, without
			// holding the plan's slot (its health check says up).
			assert.True(t, h.needsKeeping(), "mode %d: a power-off that timed out may have been carried out: %+v", mode, h)
		}
		w.close()
	}
}

// TestDeadBMCCancelledPlanEnds: a plan cancelled while its only job waits
// on a BMC that never answers ends at once (issue 38, A.1; old code: the
// job waited in withdrawing for ever).
func TestDeadBMCCancelledPlanEnds(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.bmcs[ids[0]].mode = bmcAuth
	w.open()
	defer w.close()
	w.newPlan()
	w.run(ids, 2*time.Minute)
	_, err := plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel)
	require.NoError(t, err)
	w.run(ids, 2*time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobCancelled, jobs[0].State, jobs[0].Error)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
}

// offThenDead runs a one-server world until its BMC accepted a power-off,
// then makes the BMC hang for ever (nothing it is asked is applied).
func offThenDead(t *testing.T) (*world, []string) {
	w, ids := newWorld(t, 1, 1)
	w.budget = 1
	b := w.bmcs[ids[0]]
	w.open()
	w.newPlan()
	for i := 0; i < 300 && len(b.offs) == 0; i++ {
		w.run(ids, time.Second)
	}
	require.NotEmpty(t, b.offs, "a power-off was sent")
	b.mode = bmcHung
	return w, ids
}

// TestDeadBMCMidCycleEndsJob: the BMC accepted the power-off, then never
// answers again. The job ends failed within the job timeout of its
// request, saying the server may be off, and the plan ends; the fleet
// keeps the server's power bookkeeping and powers it on once its BMC
// answers (issue 38, A.1; old code: the job waited in rebooting for ever).
func TestDeadBMCMidCycleEndsJob(t *testing.T) {
	w, ids := offThenDead(t)
	defer w.close()
	b := w.bmcs[ids[0]]
	w.run(ids, w.cfg.JobTimeout+2*time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobFailed, jobs[0].State)
	assert.Contains(t, jobs[0].Error, "may be off")
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.True(t, h.needsKeeping(), "the fleet still reconciles a server that may be off")
	b.mode = bmcOK
	w.run(ids, 10*time.Minute)
	assert.True(t, b.p.HardwareOn(), "powered on once the BMC answers")
}

// TestAbandonServer: the operator abandons a server whose BMC died
// mid-cycle: its job ends at once, undrained, naming its last known
// power phase; nothing is sent to its BMC any more, even once it answers;
// Status shows it abandoned (issue 38, A.1; old code: no way to give up).
func TestAbandonServer(t *testing.T) {
	w, ids := offThenDead(t)
	defer w.close()
	b := w.bmcs[ids[0]]
	undrained := 0
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "undrain" {
			undrained++
		}
		return nil
	}
	w.f.inv.Servers[0].Undrain = []string{"undrain"}
	w.run(ids, time.Minute)
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, 10*time.Second)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobFailed, jobs[0].State)
	assert.Contains(t, jobs[0].Error, "abandoned by the operator (by alice); last known power:")
	assert.Equal(t, 1, undrained)
	b.mode = bmcOK
	calls := len(b.p.Calls())
	w.run(ids, 30*time.Minute)
	assert.Equal(t, calls, len(b.p.Calls()), "nothing reaches an abandoned server's BMC")
	st, err := w.f.Status()
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.Equal(t, "by alice", st[0].Abandoned)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
	require.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "again", PlanUUID: w.plans[0]}))
	again, ok, err := w.f.job("again")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, JobFailed, again.State, "a job of the plan it was abandoned in never runs")
	assert.Contains(t, again.Error, "abandoned by the operator (by alice)")
}

// selfWorld is a world whose server 0 runs the executor (from the moment
// setSelf is called): its reboot command counts runs, and its boot ID
// changes bootDelay after the command ran.
type selfWorld struct {
	*world
	ids       []string
	boot      string
	bootErr   error
	runs      int
	failRun   bool
	bootDelay time.Duration
	rebootAt  time.Time
	onRun     func()
}

func newSelfWorld(t *testing.T, n, conc int) *selfWorld {
	w, ids := newWorld(t, n, conc)
	w.inv.Servers[0].Reboot = []string{"reboot-self"}
	return &selfWorld{world: w, ids: ids, boot: "boot-1"}
}

func (sw *selfWorld) setSelf() {
	sw.f.opts.Self = sw.ids[0]
	sw.f.opts.BootID = func() (string, error) {
		if !sw.rebootAt.IsZero() && !sw.clk.Real().Before(sw.rebootAt) {
			sw.boot, sw.rebootAt = sw.boot+"+", time.Time{}
		}
		return sw.boot, sw.bootErr
	}
	sw.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] != "reboot-self" {
			return nil
		}
		sw.runs++
		if sw.onRun != nil {
			sw.onRun()
		}
		if sw.rebootAt.IsZero() {
			sw.rebootAt = sw.clk.Real().Add(sw.bootDelay)
		}
		if sw.failRun {
			return errors.New("killed by the shutdown")
		}
		return nil
	}
}

// TestSelfCheckedBeforeAnything: the executor's server's reboot began
// through its BMC before the executor knew it ran there (its power-off
// timed out, so it may have been accepted); restarted with --self, the
// executor never powers it off through its BMC, withdraws the request,
// and reboots it through its OS, once (issue 38, A.2; old code: the
// "power-off may have been accepted" shortcut sent the power-off again).
func TestSelfCheckedBeforeAnything(t *testing.T) {
	sw := newSelfWorld(t, 1, 1)
	b := sw.bmcs[sw.ids[0]]
	b.mode = bmcOffHung
	sw.open()
	sw.newPlan()
	for i := 0; i < 300 && len(b.offs) == 0; i++ {
		sw.run(sw.ids, time.Second)
	}
	require.NotEmpty(t, b.offs)
	h, err := sw.f.hosts.load(sw.ids[0])
	require.NoError(t, err)
	require.True(t, h.OffMaybe, "the power-off may have been accepted")
	sw.close()
	b.mode = bmcOK
	sent := len(b.offs)
	sw.open()
	defer sw.close()
	sw.setSelf()
	sw.run(sw.ids, 10*time.Minute)
	assert.Len(t, b.offs, sent, "no power-off reaches the executor's own server's BMC once it knows")
	assert.Zero(t, b.p.Cycles())
	assert.Equal(t, 1, sw.runs, "rebooted once through its OS")
	jobs, err := sw.f.Jobs()
	require.NoError(t, err)
	assert.Equal(t, JobDone, jobs[0].State, jobs[0].Error)
}

// TestSelfRebootCommandOnce: the reboot command delays the reboot by a
// minute (shutdown -r +1) and the run fails as the shutdown kills it;
// the boot ID cannot be read for a while after the restart. The command
// runs once, the job ends done on the new boot (issue 38, A.3; old code:
// the command ran up to 8 times per step, and its failure failed the job).
func TestSelfRebootCommandOnce(t *testing.T) {
	sw := newSelfWorld(t, 1, 1)
	sw.bootDelay = time.Minute
	sw.failRun = true
	sw.open()
	defer sw.close()
	sw.setSelf()
	sw.newPlan()
	sw.run(sw.ids, 30*time.Second)
	require.Equal(t, 1, sw.runs)
	sw.close()
	sw.open() // the executor restarted on the new boot, the boot ID unreadable at first
	sw.setSelf()
	sw.bootErr = errors.New("no boot id")
	sw.run(sw.ids, 2*time.Minute)
	sw.bootErr = nil
	sw.run(sw.ids, 2*time.Minute)
	assert.Equal(t, 1, sw.runs, "the reboot command ran once")
	jobs, err := sw.f.Jobs()
	require.NoError(t, err)
	assert.Equal(t, JobDone, jobs[0].State, jobs[0].Error)
}

// TestSelfLastAlone: the executor's server and another are in a plan at
// concurrency 2: the executor reboots itself only when no server it
// powered off waits for it (issue 38, A.2; old code: it rebooted itself
// while the other server was off).
func TestSelfLastAlone(t *testing.T) {
	sw := newSelfWorld(t, 2, 2)
	sw.bootDelay = time.Second
	other := sw.bmcs[sw.ids[1]]
	sw.open()
	defer sw.close()
	sw.setSelf()
	sw.onRun = func() {
		h, err := sw.f.hosts.load(sw.ids[1])
		require.NoError(t, err)
		assert.True(t, other.p.HardwareOn(), "the other server is on when the executor reboots itself")
		assert.False(t, h.needsKeeping(), "no power cycle of the other server is unsettled")
	}
	sw.newPlan()
	sw.run(sw.ids, 15*time.Minute)
	assert.Equal(t, 1, sw.runs)
	assert.Equal(t, 1, other.p.Cycles())
	pl, err := sw.store.Get(sw.ctx(), sw.plans[0])
	require.NoError(t, err)
	assert.Equal(t, plan.StateComplete, pl.State, plan.Table(pl))
}

// TestEveryEndUndrains: a drain that fails, a health check that never
// passes, and a cancel after the power cycle each end the job with the
// server undrained (issue 38, A.4; old code: the job ended failed or
// cancelled and left the server cordoned).
func TestEveryEndUndrains(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(w *world, ids []string, drainErr *error)
		during func(w *world)
		end    string
	}{
		{"drain fails", func(_ *world, _ []string, drainErr *error) { *drainErr = errors.New("kubectl: exit 1") }, nil, JobFailed},
		{"health never passes", func(w *world, _ []string, _ *error) { w.bootTime = 24 * time.Hour }, nil, JobFailed},
		{"cancel after the power cycle", func(w *world, _ []string, _ *error) { w.bootTime = 24 * time.Hour }, func(w *world) {
			_, _ = plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel)
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, ids := newWorld(t, 1, 1)
			w.inv.Servers[0].Drain, w.inv.Servers[0].Undrain = []string{"drain"}, []string{"undrain"}
			var drainErr error
			c.setup(w, ids, &drainErr)
			w.open()
			defer w.close()
			drained, undrained := 0, 0
			w.f.opts.command = func(_ context.Context, argv []string) error {
				switch argv[0] {
				case "drain":
					drained++
					return drainErr
				case "undrain":
					undrained++
				}
				return nil
			}
			w.newPlan()
			if c.during != nil {
				for i := 0; i < 600 && w.bmcs[ids[0]].p.Cycles() == 0; i++ {
					w.run(ids, time.Second)
				}
				w.run(ids, 30*time.Second)
				c.during(w)
			}
			w.run(ids, 30*time.Minute)
			jobs, err := w.f.Jobs()
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			assert.True(t, jobs[0].Over(), jobs[0].State)
			if c.end != "" {
				assert.Equal(t, c.end, jobs[0].State, jobs[0].Error)
			}
			assert.Equal(t, 1, drained)
			assert.Equal(t, 1, undrained, "the drain was undone: %s", jobs[0].Error)
		})
	}
}

// TestOffMaybeClearedWhenSettled: a reboot settles; a later job is
// cancelled between recording its request step and writing the request
// (the executor died there). It ends cancelled without claiming a power
// cycle, and undrained (issue 38, A.6; old code: the first reboot's
// "power-off may have been accepted" flag was never cleared, so the later
// job counted the old power cycle as its own and left the server drained).
func TestOffMaybeClearedWhenSettled(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.inv.Servers[0].Undrain = []string{"undrain"}
	w.open()
	defer func() { w.close() }()
	w.newPlan()
	w.run(ids, 10*time.Minute)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	require.Equal(t, plan.StateComplete, pl.State, plan.Table(pl))
	undrained := 0
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "undrain" {
			undrained++
		}
		return nil
	}
	w.f.opts.crash = func(point string) bool { return point == "job requesting request" }
	require.NoError(t, w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "later", PlanUUID: "p9"}))
	w.f.stepServer(w.ctx(), ids[0])
	require.True(t, w.f.isDead())
	_ = w.f.Close()
	w.open()
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "undrain" {
			undrained++
		}
		return nil
	}
	require.NoError(t, w.f.cancelJob("later", "cancelled by the test"))
	for range 20 {
		w.f.stepServer(w.ctx(), ids[0])
		w.clk.Advance(time.Second)
	}
	j, ok, err := w.f.job("later")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, JobCancelled, j.State)
	assert.Nil(t, j.Finished, "no power cycle is claimed: %s", j.Error)
	assert.Equal(t, 1, undrained)
	assert.Equal(t, 1, w.bmcs[ids[0]].p.Cycles())
}

// TestDoneMeansThisRequestsPowerCycle: a reboot settles; the wall clock
// steps back ten minutes; the next job chooses its request and the
// executor dies before writing it; it restarts once the clock has passed
// the first reboot's power-off evidence again. The job is done only after
// a power cycle of its own request (ground truth), never on the old
// evidence (issue 38, A.7; old code: the earlier power-off fenced the new
// request at once, and the plan recorded the server done with no power
// cycle).
func TestDoneMeansThisRequestsPowerCycle(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.cfg.JobTimeout = time.Hour
	p := w.bmcs[ids[0]].p
	w.open()
	defer func() { w.close() }()
	w.newPlan()
	w.run(ids, 10*time.Minute)
	require.Equal(t, 1, p.Cycles())
	w.clk.Jump(-10 * time.Minute)
	w.f.opts.crash = func(point string) bool { return point == "job requesting request" }
	w.newPlan()
	for i := 0; i < 30 && !w.f.isDead(); i++ {
		w.pass()
		w.f.stepServer(w.ctx(), ids[0])
		w.clk.Advance(time.Second)
	}
	require.True(t, w.f.isDead(), "killed between choosing and writing the request")
	_ = w.f.Close()
	w.clk.Advance(15 * time.Minute)
	w.open()
	for i := 0; i < 600; i++ {
		w.run(ids, time.Second)
		jobs, err := w.f.Jobs()
		require.NoError(t, err)
		for _, j := range jobs {
			if j.Plan == w.plans[1] && (j.Finished != nil || j.State == JobDone) {
				require.Equal(t, 2, p.Cycles(), "job %s counts a power cycle (%s) the hardware never had", j.UUID, j.State)
			}
		}
	}
	pl, err := w.store.Get(w.ctx(), w.plans[1])
	require.NoError(t, err)
	assert.Equal(t, plan.StateComplete, pl.State, plan.Table(pl))
	assert.Equal(t, 2, p.Cycles())
}

// TestMissingServerRefused: a server is taken out of the inventory while
// its reboot has powered it off; the executor restarted with that
// inventory refuses to start, naming it; put back, the server is powered
// on (issue 38, A.5; old code: the fleet started, logged at Debug, and
// the server stayed off for good).
func TestMissingServerRefused(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	w.open()
	var off string
	for i := 0; i < 300 && off == ""; i++ {
		if i == 0 {
			w.newPlan()
		}
		w.run(ids, time.Second)
		for _, id := range ids {
			if !w.bmcs[id].p.HardwareOn() {
				off = id
			}
		}
	}
	require.NotEmpty(t, off, "a server was powered off")
	w.close()
	full := w.inv
	w.inv = Inventory{}
	for _, s := range full.Servers {
		if s.UUID != off {
			w.inv.Servers = append(w.inv.Servers, s)
		}
	}
	_, err := OpenFleet(w.inv, w.path, Options{Now: w.clk.Now, Monotonic: w.clk.Monotonic, manual: true})
	require.ErrorIs(t, err, ErrMissingServer)
	name, _ := full.Server(off)
	assert.Contains(t, err.Error(), name.Hostname)
	w.inv = full
	w.open()
	defer w.close()
	w.run(ids, 10*time.Minute)
	assert.True(t, w.bmcs[off].p.HardwareOn())
}

// TestStaleHealthCountsDown: a server's health check passed; its next
// check hangs (the checks of dead servers queue, or the server crashed and
// its check times out). Once the last result is older than HealthMaxAge
// the server counts as down, not up (issue 38, A.9; old code: the last
// result counted whatever its age, so a crashed server counted as up and
// the plan could take more servers offline than its concurrency).
func TestStaleHealthCountsDown(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	release := make(chan struct{})
	calls := 0
	var mu sync.Mutex
	inv := Inventory{Servers: []Server{{UUID: "u0", Hostname: "cn0", Health: Health{TCP: "h:1"}}}}
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{Now: clk.Now, Monotonic: clk.Monotonic,
		Health: func(ctx context.Context, _ Server) error {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n > 1 {
				select { // the second check hangs
				case <-release:
				case <-ctx.Done():
				}
				return errors.New("down")
			}
			return nil
		}})
	require.NoError(t, err)
	defer func() { close(release); _ = f.Close() }()
	s := inv.Servers[0]
	f.healthOf(t.Context(), []Server{s})
	require.Eventually(t, func() bool { return f.healthOf(t.Context(), []Server{s})["u0"] }, 10*time.Second, 10*time.Millisecond, "the first check passed")
	clk.Advance(3 * time.Second) // past HealthTTL: a new check starts, and hangs
	assert.True(t, f.healthOf(t.Context(), []Server{s})["u0"], "a result 3s old still counts")
	clk.Advance(20 * time.Second)
	assert.False(t, f.healthOf(t.Context(), []Server{s})["u0"], "a result 23s old counts as down")
}

// TestBMCErrorStoredClean: a BMC's error text with escape sequences is
// recorded (and so shown, logged, stored in the plan) without a control
// character (issue 38, 12; old code: stored raw).
func TestBMCErrorStoredClean(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	w.f.noteCall(ids[0], "state", errors.New("refused\x1b]52;c;ZXZpbA==\x07\x1b[2J done"))
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.Equal(t, "refused]52;c;ZXZpbA==[2J done", h.LastError.Message)
}
