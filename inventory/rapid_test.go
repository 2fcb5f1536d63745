package inventory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// BMC adversary modes.
const (
	bmcOK      = iota
	bmcAuth    // refuses the password (at login)
	bmcBusy    // answers busy to every command
	bmcHung    // never answers (the call times out), the command not applied
	bmcHungApp // never answers, the command applied all the same
	bmcOffBusy // reads the state, answers busy to power-offs
	bmcOffHung // reads the state, power-offs time out (not applied)
	bmcModes
)

// offEvent is one power-off that reached a BMC (ground truth).
type offEvent struct {
	applied bool  // the hardware was told to power off
	err     error // what the caller was told
	lost    bool  // the executor died before it learned the answer
}

// advBMC is a server's BMC as the adversary runs it: a fake.Power behind
// a login that may refuse the password, and calls that may be busy or hang.
type advBMC struct {
	p    *fake.Power
	mode int
	offs []offEvent
}

func (b *advBMC) State(ctx context.Context) (power.State, error) {
	switch b.mode {
	case bmcBusy:
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassBusy, Status: 503, Message: "busy"}
	case bmcHung, bmcHungApp:
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	}
	return b.p.State(ctx)
}

func (b *advBMC) On(ctx context.Context) error {
	switch b.mode {
	case bmcBusy:
		return &power.Error{Op: "on", Class: power.ClassBusy, Status: 409, Message: "busy"}
	case bmcHung:
		return &power.Error{Op: "on", Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	case bmcHungApp:
		_ = b.p.On(ctx)
		return &power.Error{Op: "on", Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	}
	return b.p.On(ctx)
}

func (b *advBMC) Off(ctx context.Context, m power.Mode) error {
	var err error
	applied := true
	switch b.mode {
	case bmcBusy, bmcOffBusy:
		applied, err = false, &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Status: 409, Message: "busy"}
	case bmcHung, bmcOffHung:
		applied, err = false, &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	case bmcHungApp:
		_ = b.p.Off(ctx, m)
		err = &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	default:
		err = b.p.Off(ctx, m)
	}
	b.offs = append(b.offs, offEvent{applied: applied, err: err})
	return err
}

// maybeAccepted: as far as the executor can know, this power-off may have
// taken effect: its answer was lost (the executor died before it learned
// it, or between recording the intent and sending it), it timed out or
// failed (whatever the BMC really did), or it succeeded.
func (e offEvent) maybeAccepted() bool {
	return e.lost || e.err == nil && e.applied || e.err != nil && !notApplied(e.err)
}

// world is one drawn datacenter, its executor and its ground truth.
type world struct {
	t interface {
		Fatalf(string, ...any)
		Logf(string, ...any)
	}
	clk   *fake.Clock
	inv   Inventory
	bmcs  map[string]*advBMC
	path  string
	f     *Fleet
	store *fake.PlanStore
	conc  int
	cfg   plan.Config
	plans []string
	// kill: the crash point count at which the executor dies (0: none).
	points, killAt int
	lastPoint      string
	// cancelAt[job] = (server, index into its BMC's offs) when the job was
	// cancelled or its plan ended; jobStart[job] the index at its start.
	cancelAt map[string]int
	jobStart map[string]int
	// offMark[server]: its BMC's power-offs when the last one was sent.
	offMark  map[string]int
	kills    int
	bootTime time.Duration
	// budget is the failure budget of new plans.
	budget int
	// Commands: cmdMode[server] is how its drain, undrain and reboot
	// commands behave; drained[server] is ground truth (the last drain or
	// undrain that took effect).
	cmdMode map[string]int
	drained map[string]bool
	// self is the server this executor runs on ("" none); boot[server]
	// its boot ID; osReboots[server] counts its reboots through its OS;
	// selfFrom[server] the index into its BMC's offs when it became the
	// executor's (-1 while it is not).
	self      string
	boot      map[string]string
	osReboots map[string]int
	selfFrom  map[string]int
	// cyclesAt[job]: the hardware's power cycles and OS reboots of its
	// server when the job was first seen.
	cyclesAt map[string]int
	// abandoned[server]: when the operator abandoned it (real time).
	abandoned map[string]time.Time
	// tracksOS: OS reboots go through runCommand (scenario worlds run
	// their own commands).
	tracksOS bool
	// removed: the server the operator took out of the inventory when
	// the executor last started ("" none), at removedAt (real time).
	removed   string
	removedAt time.Time
	// slowProbes: the fleet's health results are the probes the world
	// delivers (Options.slowProbes).
	slowProbes bool
	// restartDraw, if set, moves the clocks (drawn, back as well as
	// forward) between a crash and the restart that follows it.
	restartDraw func()
	// cyclesEnd[job]: the cycles() of its server when the job was first
	// seen over.
	cyclesEnd map[string]int
	// osDelay, if set, makes the executor's own server's reboot through
	// its OS take time (osEvents, applied by advance): nil, it is instant.
	osDelay  *osDelay
	osEvents []osEvent
}

// Command modes.
const (
	cmdOK   = iota
	cmdFail // fails, nothing done
	cmdHang // times out, nothing done
	cmdLate // done, but answers a timeout
	cmdModes
)

// runCommand is a drain, undrain or reboot command as the drawn world
// runs it.
func (w *world) runCommand(server string, argv []string) error {
	mode := w.cmdMode[server]
	apply := mode == cmdOK || mode == cmdLate
	if apply {
		switch argv[0] {
		case "drain":
			w.drained[server] = true
		case "undrain":
			w.drained[server] = false
		case "reboot-self":
			switch {
			case server != w.self:
			case w.osDelay != nil:
				w.scheduleOSReboot(server)
			default:
				w.osReboots[server]++
				w.boot[server] += "+"
			}
		}
	}
	switch mode {
	case cmdFail:
		return errors.New(argv[0] + ": exit status 1")
	case cmdHang, cmdLate:
		return context.DeadlineExceeded
	}
	return nil
}

// cycles is what a job's server went through: power cycles (ground
// truth) and reboots through its OS.
func (w *world) cycles(server string) int {
	return w.bmcs[server].p.Cycles() + w.osReboots[server]
}

// setSelf makes server the one the executor runs on ("" none).
func (w *world) setSelf(server string) {
	if w.self != "" {
		w.selfFrom[w.self] = -1
	}
	w.self = server
	if server != "" {
		w.selfFrom[server] = len(w.bmcs[server].offs)
	}
	w.f.opts.Self = server
}

func (w *world) open() {
	if err := w.tryOpen(); err != nil {
		w.t.Fatalf("open fleet: %v", err)
	}
}

// openInv is the inventory the executor is started with: the world's,
// less the server the operator removed.
func (w *world) openInv() Inventory {
	if w.removed == "" {
		return w.inv
	}
	inv := Inventory{Defaults: w.inv.Defaults}
	for _, s := range w.inv.Servers {
		if s.UUID != w.removed {
			inv.Servers = append(inv.Servers, s)
		}
	}
	return inv
}

func (w *world) tryOpen() error {
	if w.cyclesAt == nil { // scenario worlds (newWorld) start without them
		w.cmdMode, w.drained, w.boot, w.osReboots = map[string]int{}, map[string]bool{}, map[string]string{}, map[string]int{}
		w.selfFrom, w.cyclesAt, w.abandoned = map[string]int{}, map[string]int{}, map[string]time.Time{}
	}
	f, err := w.openFleet(0)
	if err != nil {
		return err
	}
	w.f = f
	return nil
}

// openFleet opens an executor's fleet on the world's state file (lock:
// how long to wait for the file's lock, 0 the default).
func (w *world) openFleet(lock time.Duration) (*Fleet, error) {
	return OpenFleet(w.openInv(), w.path, Options{
		lockTimeout: lock,
		Reboot:      reboot.Config{SoftTimeout: time.Minute, StaleReads: fake.MaxStale + time.Second},
		// A drawn server's accepted power-off takes effect within this,
		// or never (its soft shutdown may outlast SoftTimeout).
		ShutdownMax: fake.MaxSoftDelay + fake.MaxLag + fake.MaxEarlyOff,
		JobTimeout:  w.cfg.JobTimeout, ServicesTimeout: w.cfg.ServicesTimeout, Poll: time.Second, CallTimeout: time.Second,
		Now: w.clk.Now, Monotonic: w.clk.Monotonic, manual: true,
		Controller: func(_ context.Context, s Server) (power.Controller, error) {
			b := w.bmcs[s.UUID]
			if b.mode == bmcAuth {
				return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Message: "authentication failed", Err: power.ErrAuth}
			}
			return b, nil
		},
		Health:     func(_ context.Context, s Server) error { return w.healthNow(s.UUID) },
		slowProbes: w.slowProbes,
		command: func(_ context.Context, argv []string) error {
			for _, s := range w.inv.Servers {
				if len(argv) == 2 && argv[1] == s.UUID {
					return w.runCommand(s.UUID, argv)
				}
			}
			return nil
		},
		Self: w.self,
		BootID: func() (string, error) {
			if w.self == "" {
				return "boot-none", nil
			}
			return w.boot[w.self], nil
		},
		crash: func(point string) bool {
			w.points++
			w.lastPoint = point
			if id, ok := strings.CutPrefix(point, "power off "); ok && !strings.HasPrefix(id, "intent ") {
				w.offMark[id] = len(w.bmcs[id].offs)
			}
			return w.killAt > 0 && w.points >= w.killAt
		},
		PlanCheck: func(ctx context.Context, planUUID, jobUUID string) (bool, string, error) {
			p, err := w.store.Get(ctx, planUUID)
			if err != nil {
				return false, "", err
			}
			ok, why := testJobLive(plan.FullView(p), jobUUID, true)
			return ok, why, nil
		},
	})
}

// healthNow is server id's health check as the world answers it now: up
// once powered on (ground truth) for bootTime.
func (w *world) healthNow(id string) error {
	p := w.bmcs[id].p
	if !p.HardwareOn() {
		return errors.New("down")
	}
	var since time.Time
	for _, tc := range p.Truth() {
		if tc.On {
			since = tc.At
		}
	}
	if w.clk.Real().Sub(since) < w.bootTime {
		return errors.New("booting")
	}
	return nil
}

// testJobLive is cmd/rebootctl's rule: the plan runs the job while its
// reboot is in the job step of a plan that has not ended (or, unless
// powerOff, waits for the services).
func testJobLive(v plan.View, job string, powerOff bool) (bool, string) {
	for _, r := range v.Reboots {
		if r.JobUUID == job {
			if r.Step == plan.StepJob && !v.State.Finished() || r.Step == plan.StepServices && !powerOff {
				return true, ""
			}
			return false, fmt.Sprintf("plan %s: %s, reboot %s", v.UUID, v.State, r.Step)
		}
	}
	return false, "plan " + v.UUID + " no longer runs it"
}

// died handles a kill: the fleet is dropped as a killed process is, and
// opened again.
func (w *world) died() bool {
	if !w.f.isDead() {
		return false
	}
	w.kills++
	// A kill right after a power-off call: its answer is lost.
	// Killed before a power-off was sent, after it was recorded as maybe
	// sent: the executor cannot tell it from a lost answer.
	for id, b := range w.bmcs {
		switch {
		case w.lastPoint == "powered off "+id && len(b.offs) > w.offMark[id]:
			b.offs[len(b.offs)-1].lost = true
		case w.lastPoint == "powered off "+id, w.lastPoint == "power off intent "+id, w.lastPoint == "power off "+id:
			b.offs = append(b.offs, offEvent{lost: true})
		}
	}
	w.killAt = 0
	_ = w.f.Close()
	if w.restartDraw != nil {
		w.restartDraw()
	}
	w.open()
	return true
}

func (w *world) ctx() context.Context { return context.Background() }

func (w *world) close() { _ = w.f.Close() }

// recordCancels notes, for every live job now cancelled or whose plan
// ended or gave up on it, how many power-offs its BMC had seen.
func (w *world) recordCancels() {
	jobs, err := w.f.Jobs()
	if err != nil {
		w.t.Fatalf("jobs: %v", err)
	}
	for _, j := range jobs {
		if _, ok := w.jobStart[j.UUID]; !ok {
			w.jobStart[j.UUID] = len(w.bmcs[j.Server].offs)
			w.cyclesAt[j.UUID] = w.cycles(j.Server)
		}
		if _, seen := w.cyclesEnd[j.UUID]; !seen && j.Over() && w.cyclesEnd != nil {
			w.cyclesEnd[j.UUID] = w.cycles(j.Server)
		}
		if _, done := w.cancelAt[j.UUID]; done || j.Over() {
			continue
		}
		ended := j.Cancel
		if p, err := w.store.Get(w.ctx(), j.Plan); err == nil {
			if live, _ := testJobLive(plan.FullView(p), j.UUID, true); !live {
				ended = true
			}
		}
		if ended {
			w.cancelAt[j.UUID] = len(w.bmcs[j.Server].offs)
		}
	}
}

func (w *world) pass() {
	exec := &plan.Executor{Fleet: w.f, Store: w.store, Config: w.cfg, Now: w.clk.Now}
	for _, id := range w.plans {
		p, err := w.store.Get(w.ctx(), id)
		if err != nil || !p.Unfinished() || p.State == plan.StateCreated {
			continue
		}
		_, _ = exec.Pass(w.ctx(), id)
		if w.died() {
			// The jobs this pass created are seen now, before any of
			// their steps (a job first seen later would count the
			// power-offs it sent as a predecessor's).
			w.recordCancels()
			return
		}
	}
	_ = w.f.Sync(w.ctx(), func(j JobRecord) (bool, bool, string) {
		p, err := w.store.Get(w.ctx(), j.Plan)
		if err != nil {
			return false, false, ""
		}
		live, why := testJobLive(plan.FullView(p), j.UUID, false)
		return true, live, why
	})
	// As the executor does after every pass: ended jobs their plans no
	// longer need leave the state file (issue 38, 15).
	_, _ = w.f.Prune(w.neededBy)
	w.recordCancels()
}

func (w *world) step(server string) {
	w.f.stepServer(w.ctx(), server)
	w.died()
	w.recordCancels()
}

// check verifies the invariants against ground truth.
func (w *world) check() {
	jobs, err := w.f.Jobs()
	if err != nil {
		w.t.Fatalf("jobs: %v", err)
	}
	live := map[string]string{}
	for _, j := range jobs {
		if j.Over() {
			continue
		}
		if other, ok := live[j.Server]; ok {
			w.t.Fatalf("two live jobs on %s: %s and %s", j.Server, other, j.UUID)
		}
		live[j.Server] = j.UUID
	}
	for id, b := range w.bmcs {
		// No server left off once its job ended, unless the fleet still
		// reconciles it (a job gives up on a BMC that stopped answering
		// mid-cycle; the fleet powers it on once it answers) or the
		// operator abandoned it.
		h, _ := w.f.hosts.load(id)
		// (A server rebooting through its OS comes back on by itself.)
		if _, busy := live[id]; !busy && !b.p.HardwareOn() && !h.needsKeeping() && h.Abandoned == "" && !w.osRebooting(id) {
			jobs, _ := w.f.Jobs()
			hh, _ := w.f.hosts.load(id)
			w.t.Fatalf("server %s is off and no job of the fleet is live on it: jobs %+v host %+v", id, jobs, hh)
		}
	}
	// No power-off after a job was cancelled or its plan ended, unless a
	// power-off of its reboot may have been accepted before.
	for _, j := range jobs {
		c, ok := w.cancelAt[j.UUID]
		if !ok {
			continue
		}
		offs := w.bmcs[j.Server].offs
		end := len(offs)
		if j.Over() {
			end = min(end, c) // later ones belong to later jobs
		}
		accepted := false
		for _, e := range offs[min(w.jobStart[j.UUID], c):c] {
			accepted = accepted || e.maybeAccepted()
		}
		for k := c; k < len(offs) && k < end; k++ {
			if offs[k].applied && !accepted {
				w.t.Fatalf("job %s (server %s): power-off %d sent after it was cancelled or its plan ended, none accepted before (start %d, cancel %d, offs %+v, job %+v, first err %v)",
					j.UUID, j.Server, k, w.jobStart[j.UUID], c, offs, j, offs[0].err)
			}
		}
	}
	// No server stays drained after its job ended, unless its undrain
	// kept failing and the job says so; done means a power cycle (or a
	// reboot through its OS) of this reboot happened; the executor's own
	// server is never powered off through its BMC.
	last := map[string]JobRecord{}
	for _, j := range jobs {
		// (A job that never started never drained or undrained: one
		// recorded failed because its server was abandoned says
		// nothing of the drain.)
		if p, ok := last[j.Server]; (j.Started != nil || !j.Over()) && (!ok || j.Created.After(p.Created) || p.Over() && !j.Over()) {
			last[j.Server] = j
		}
		if j.State == JobDone && (j.BootID == "" || w.tracksOS) {
			if at, seen := w.cyclesAt[j.UUID]; seen && w.cycles(j.Server) <= at {
				w.t.Fatalf("job %s is done but its server %s went through no power cycle or reboot since it started (%d)", j.UUID, j.Server, at)
			}
		}
	}
	for id := range w.bmcs {
		j, ok := last[id]
		if _, busy := live[id]; !busy && ok && j.Over() && w.drained[id] && !strings.Contains(j.Error, "left drained") {
			w.t.Fatalf("server %s stays drained after its job %s ended %s (%s)", id, j.UUID, j.State, j.Error)
		}
		if k, ok := w.selfFrom[id]; ok && k >= 0 {
			for _, o := range w.bmcs[id].offs[k:] {
				if o.applied {
					w.t.Fatalf("the executor's own server %s was powered off through its BMC", id)
				}
			}
		}
	}
	// A server the executor runs without (removed from its inventory)
	// was on then and is never powered off after: nothing of ours may be
	// left unsettled on it.
	if w.removed != "" {
		for _, tc := range w.bmcs[w.removed].p.Truth() {
			if !tc.On && !tc.At.Before(w.removedAt) {
				w.t.Fatalf("server %s went off at %s, after the executor started without it (removed at %s)", w.removed, tc.At, w.removedAt)
			}
		}
	}
	// One power cycle at most per reboot (ground truth): a job resumed
	// after a crash, or a second executor started on its store, never
	// power-cycles its server again.
	if w.cyclesEnd != nil {
		for _, j := range jobs {
			at, seen := w.cyclesAt[j.UUID]
			end, over := w.cyclesEnd[j.UUID]
			if !over {
				end = w.cycles(j.Server)
			}
			if seen && end-at > 1 {
				w.t.Fatalf("job %s power-cycled (or rebooted) server %s %d times", j.UUID, j.Server, end-at)
			}
		}
	}
	// Servers off <= concurrency at every instant.
	if n := maxOff(w.bmcs); n > w.conc {
		w.t.Fatalf("%d servers off at once, concurrency %d", n, w.conc)
	}
}

// maxOff is the most servers off at once (ground truth), every server
// counted while it is off, abandoned by the operator or not: an
// abandoned server that is off (or goes off late, a power-off sent before
// the abandon landing) is as offline as any other.
func maxOff(bmcs map[string]*advBMC) int {
	type ev struct {
		at  time.Time
		off int
	}
	var evs []ev
	for _, b := range bmcs {
		for _, tc := range b.p.Truth() {
			if tc.On {
				evs = append(evs, ev{tc.At, -1})
			} else {
				evs = append(evs, ev{tc.At, +1})
			}
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		return evs[i].at.Before(evs[j].at) || evs[i].at.Equal(evs[j].at) && evs[i].off < evs[j].off
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.off
		best = max(best, cur)
	}
	return best
}

func (w *world) newPlan() {
	id := fmt.Sprintf("p%d", len(w.plans)+1)
	created := w.clk.Now()
	p, _, err := plan.Create(w.inv.PlanServers(), plan.CreateOptions{UUID: id, Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(w.conc), FailureBudget: plan.Count(w.budget), IgnoreWarnings: true, CreatedAt: created})
	if err != nil {
		w.t.Fatalf("create: %v", err)
	}
	if err := w.store.Create(w.ctx(), p); err != nil {
		return // a server is in an unfinished plan
	}
	if _, err := plan.Command(w.ctx(), w.store, id, plan.Run); err != nil {
		w.t.Fatalf("run: %v", err)
	}
	w.plans = append(w.plans, id)
}

// TestJobStateMachine drives inventory fleets (the jobs and the power
// bookkeeping, through their pure decisions and appliers) and a plan
// executor over adversary BMCs — stale, unknown and slow power readings,
// soft shutdowns ignored or unsupported, BMCs that refuse the password,
// answer busy, or hang with or without applying the command — with the
// executor killed between any two steps (also between a power call and
// what follows it), operators stopping, running and cancelling plans, and
// plans ending while jobs run, drain, undrain and reboot commands that
// fail, hang, or take effect and answer late, the executor's own server
// set or changed mid-plan, and the executor restarted with a server removed
// from its inventory (refused while the fleet is busy with it: the
// operator puts it back). Against ground truth (the fake hardware, what
// reached each BMC, what each command did): no server is off while no job
// of the fleet is live on it unless the fleet still reconciles it; no
// power-off reaches a BMC after its job was cancelled or its plan ended or
// gave up on it, unless a power-off of that reboot may have been accepted
// before; one live job per server; at most concurrency servers off at every
// instant; done implies a power cycle (or an OS reboot of the executor's
// own server) since the job started; no server stays drained after its job
// ended unless the job says its undrain kept failing; the executor's own
// server is never powered off through its BMC; a server the executor
// started without was on then and is never powered off after (with the
// refusal of ErrMissingServer removed, it started without a server its
// power cycle had left off). Liveness keeps one BMC
// (drawn) dead for ever, refusing every login or never answering: every
// plan still ends and every other server is on, the operator abandoning the
// dead one if its plan waits for it, and powering it on by hand if it is
// off (an abandoned server counts offline while it is off: the plan
// rightly waits for it) (issue 26, A1-A3, A5; issue 38, C).
func TestJobStateMachine(t *testing.T) {
	jobStateMachine(t, false)
}

// TestJobStateMachineTwoExecutors is TestJobStateMachine with a second
// executor started on the same fleet state file while the first runs (it
// must be refused, ErrLocked, and never act), the clocks moved (back as
// well as forward) between every crash and the restart that follows it,
// and, against ground truth, at most one power cycle (or OS reboot) per
// job (issue 38, C). A second executor given another state file is
// refused by rebootctl's lease on the plan store (e2e
// TestSecondExecutorRefused).
func TestJobStateMachineTwoExecutors(t *testing.T) {
	jobStateMachine(t, true)
}

func jobStateMachine(t *testing.T, two bool) {
	jobStateMachineWith(t, machine{two: two})
}
