package inventory

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// machine says which adversaries jobStateMachineWith adds to
// TestJobStateMachine's (with none, it draws exactly as it always did, so
// that committed failure files replay).
type machine struct {
	// two: a second executor started on the state file while the first
	// runs, and the clocks moved between every crash and its restart.
	two bool
	// abandons: the operator's abandons drawn mid-run ("plan abandon
	// PLAN SERVER" for any plan and server, one recorded per server,
	// latest wins, applied by the executor before every pass), the
	// operator powering an abandoned server on by hand, and the executor's
	// own server rebooting through its OS as a real one does (drawn
	// delay, then drawn time offline: w.osDelay).
	abandons bool
	// slowProbes: health probes answer up to 40 s after they read the
	// server (Options.slowProbes).
	slowProbes bool
}

// metaAbandon is one abandon as rebootctl records it in the plan store
// (one per server, the latest wins) and its executor applies before
// every pass (applyAbandoned).
type metaAbandon struct{ plan, why string }

func jobStateMachineWith(t *testing.T, m machine) {
	rapidcheck.Check(t, func(rt *rapid.T) {
		w := &world{t: rt, clk: fake.NewClock(time.Time{}), bmcs: map[string]*advBMC{}, store: fake.NewPlanStore(),
			cancelAt: map[string]int{}, jobStart: map[string]int{}, offMark: map[string]int{},
			cmdMode: map[string]int{}, drained: map[string]bool{}, boot: map[string]string{}, osReboots: map[string]int{},
			selfFrom: map[string]int{}, cyclesAt: map[string]int{}, abandoned: map[string]time.Time{}, slowProbes: m.slowProbes}
		w.path = filepath.Join(t.TempDir(), fmt.Sprintf("fleet-%d.db", time.Now().UnixNano()))
		w.budget = rapid.IntRange(0, 2).Draw(rt, "budget")
		w.tracksOS = true
		n := rapid.IntRange(1, 3).Draw(rt, "servers")
		w.conc = rapid.IntRange(1, 2).Draw(rt, "concurrency")
		w.bootTime = time.Duration(rapid.IntRange(0, 30).Draw(rt, "bootSeconds")) * time.Second
		w.cfg = plan.Config{DrainTimeout: 10 * time.Minute, JobTimeout: time.Duration(rapid.IntRange(2, 20).Draw(rt, "jobMinutes")) * time.Minute,
			ServicesTimeout: 10 * time.Minute}
		for i := range n {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			cfg := fake.DrawPowerConfig(rt, id)
			w.bmcs[id] = &advBMC{p: fake.NewPower(w.clk.Real, cfg)}
			w.inv.Servers = append(w.inv.Servers, Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1",
				BMC: BMC{Redfish: "https://bmc" + id, Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"},
				Drain: []string{"drain", id}, Undrain: []string{"undrain", id}, Reboot: []string{"reboot-self", id}})
			w.boot[id], w.selfFrom[id] = "boot-"+id, -1
		}
		ids := make([]string, 0, n)
		for id := range w.bmcs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		w.open()
		defer func() { _ = w.f.Close() }()
		w.newPlan()
		if m.abandons {
			// The OS reboot of the executor's own server lands within
			// ShutdownMax of its command (shutdown -r +N, a slow
			// shutdown), then the server is off a while before its new
			// boot.
			w.osDelay = &osDelay{
				land: time.Duration(rapid.IntRange(0, int((w.f.opts.ShutdownMax-8*time.Second)/time.Second)).Draw(rt, "osRebootDelaySeconds")) * time.Second,
				down: time.Duration(rapid.IntRange(1, 60).Draw(rt, "osRebootDownSeconds")) * time.Second,
			}
		}
		var lag time.Duration
		pending := map[string]probe{}
		if m.slowProbes {
			lag = time.Duration(rapid.IntRange(0, 40).Draw(rt, "probeLagSeconds")) * time.Second
		}
		tick := func() {
			if !m.slowProbes {
				return
			}
			for _, id := range ids {
				if p, ok := pending[id]; ok && w.clk.Monotonic()-p.at >= lag {
					w.f.probeResult(id, p.ok, p.at)
					delete(pending, id)
				}
				if _, busy := pending[id]; !busy {
					pending[id] = probe{ok: w.healthNow(id) == nil, at: w.clk.Monotonic()}
				}
			}
		}
		meta := map[string]metaAbandon{}
		pass := func() {
			tick()
			// As passAll does: every recorded abandon, before every pass.
			for s, a := range meta {
				_ = w.f.Abandon(s, a.plan, a.why)
			}
			w.pass()
		}
		actions := map[string]func(*rapid.T){
			"pass": func(*rapid.T) { pass() },
			"step": func(t *rapid.T) { w.step(rapid.SampledFrom(ids).Draw(t, "server")) },
			"stepAll": func(*rapid.T) {
				for _, id := range ids {
					w.step(id)
				}
			},
			"time": func(t *rapid.T) {
				w.advance(time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(2*time.Minute)).Draw(t, "advance")))
				tick()
			},
			"clock": func(t *rapid.T) { w.move(fake.DrawClockMove(t, "clock", true)) },
			"kill":  func(t *rapid.T) { w.killAt = w.points + rapid.IntRange(1, 12).Draw(t, "killAfter") },
			"bmc": func(t *rapid.T) {
				w.bmcs[rapid.SampledFrom(ids).Draw(t, "bmcServer")].mode = rapid.IntRange(0, bmcModes-1).Draw(t, "bmcMode")
			},
			"operator": func(t *rapid.T) {
				if len(w.plans) == 0 {
					return
				}
				id := w.plans[len(w.plans)-1]
				cmd := rapid.SampledFrom([]string{"stop", "run", "cancel"}).Draw(t, "command")
				f := map[string]func(plan.Plan) (plan.Plan, error){"stop": plan.Stop, "run": plan.Run, "cancel": plan.Cancel}[cmd]
				_, _ = plan.Command(w.ctx(), w.store, id, f)
				w.recordCancels()
			},
			"newPlan": func(*rapid.T) { w.newPlan() },
			"cmd": func(t *rapid.T) {
				w.cmdMode[rapid.SampledFrom(ids).Draw(t, "cmdServer")] = rapid.IntRange(0, cmdModes-1).Draw(t, "cmdMode")
			},
			"self": func(t *rapid.T) {
				// The executor learns (or is told after a restart) which
				// server it runs on, mid-plan.
				// Only a server that runs (the executor runs there):
				// on, and no power-off of ours may have been applied.
				id := rapid.SampledFrom(append([]string{""}, ids...)).Draw(t, "self")
				if id != "" && id == w.removed {
					t.Skip("the executor runs on a server of its inventory")
				}
				if id != "" {
					b := w.bmcs[id]
					// Ground truth: not one whose OS is shutting down
					// (a soft power-off accepted earlier, not only the
					// last one: it would stop the executor).
					if !b.p.HardwareOn() || b.p.GoingOff() || len(b.offs) > 0 && (b.offs[len(b.offs)-1].applied || b.offs[len(b.offs)-1].lost) && b.p.Cycles() == 0 {
						t.Skip("the executor cannot run on a server that may be shutting down")
					}
					if h, _ := w.f.hosts.load(id); h.OffMaybe && len(b.offs) > 0 && (b.offs[len(b.offs)-1].applied || b.offs[len(b.offs)-1].lost) {
						t.Skip("the executor cannot run on a server that may be shutting down")
					}
					if w.osRebooting(id) {
						t.Skip("the executor cannot run on a server that is rebooting through its OS")
					}
				}
				w.setSelf(id)
			},
			"inventory": func(t *rapid.T) {
				// The executor restarts with a server removed from the
				// inventory (or all of them back): refused while the
				// fleet is busy with it (the operator puts it back),
				// else it runs without it.
				id := rapid.SampledFrom(append([]string{""}, ids...)).Draw(t, "removed")
				if id != "" && id == w.self {
					t.Skip("the executor's own server stays in its inventory")
				}
				if _, ok := w.abandoned[id]; ok {
					t.Skip("a server the operator abandoned is theirs (removing it is their call)")
				}
				_ = w.f.Close()
				w.removed = id
				err := w.tryOpen()
				if errors.Is(err, ErrMissingServer) {
					w.removed = ""
					w.open()
					return
				}
				if err != nil {
					t.Fatalf("open fleet: %v", err)
				}
				if id != "" {
					w.removedAt = w.clk.Real()
					if !w.bmcs[id].p.HardwareOn() {
						t.Fatalf("the executor started without server %s, which is off", id)
					}
				}
			},
			"": func(*rapid.T) { w.check() },
		}
		if m.abandons {
			actions["abandon"] = func(t *rapid.T) {
				// rebootctl plan abandon PLAN SERVER: a plan that
				// reboots the server (every plan reboots every server).
				if len(w.plans) == 0 {
					return
				}
				s := rapid.SampledFrom(ids).Draw(t, "abandonServer")
				p := rapid.SampledFrom(w.plans).Draw(t, "abandonPlan")
				if a, ok := meta[s]; ok && a.plan == p {
					return // "already abandoned in plan"
				}
				meta[s] = metaAbandon{plan: p, why: fmt.Sprintf("plan abandon at %s", w.clk.Now().Format(time.RFC3339Nano))}
				w.abandoned[s] = w.clk.Real()
			}
			actions["byHand"] = func(t *rapid.T) {
				// The operator powers on by hand a server they abandoned
				// that is off (only while it is still abandoned, as show
				// says: a job of another plan may have taken it back).
				s := rapid.SampledFrom(ids).Draw(t, "byHandServer")
				if h, _ := w.f.hosts.load(s); h.Abandoned != "" && !w.bmcs[s].p.HardwareOn() {
					w.bmcs[s].p.OutOfBandOn()
				}
			}
		}
		if m.slowProbes {
			actions["work"] = func(*rapid.T) {
				for range 4 {
					pass()
					for _, id := range ids {
						w.step(id)
					}
					w.check()
					w.advance(time.Second)
				}
			}
		}
		if m.two {
			w.cyclesEnd = map[string]int{}
			w.restartDraw = func() { w.move(fake.DrawClockMove(rt, "restartClock", true)) }
			actions["second"] = func(t *rapid.T) {
				// A second executor on the same state file while the
				// first runs: refused before it reads or does anything.
				f, err := w.openFleet(10 * time.Millisecond)
				if err == nil {
					_ = f.Close()
					t.Fatalf("a second executor opened the fleet state file %s while the first runs", w.path)
				}
				if !errors.Is(err, ErrLocked) {
					t.Fatalf("second executor: %v, want ErrLocked", err)
				}
			}
		}
		rt.Repeat(actions)
		if w.removed != "" { // the operator puts it back
			_ = w.f.Close()
			w.removed = ""
			w.open()
		}
		// Liveness with the faults the design must survive kept on: one
		// BMC (drawn) stays dead for ever (refusing every login, or never
		// answering); the others and the commands behave. Every plan
		// ends, every other server is on and settled, no job is left;
		// the operator abandons the dead server if its plan waits for it
		// (a power-off of it may have been accepted before it died).
		dead := rapid.SampledFrom(append([]string{""}, ids...)).Draw(rt, "deadBMC")
		deadMode := rapid.SampledFrom([]int{bmcAuth, bmcHung}).Draw(rt, "deadMode")
		for id, b := range w.bmcs {
			b.mode = bmcOK
			if id == dead {
				b.mode = deadMode
			}
			w.cmdMode[id] = cmdOK
		}
		w.killAt = 0
		lag = 0 // probes answer at once: a round slower than HealthMaxAge rightly starts nothing
		for i := 0; ; i++ {
			pass()
			for _, id := range ids {
				w.step(id)
			}
			w.check()
			settled := true
			for _, id := range w.plans {
				if p, err := w.store.Get(w.ctx(), id); err == nil && p.Unfinished() {
					if p.State == plan.StateStopped {
						_, _ = plan.Command(w.ctx(), w.store, id, plan.Run)
					}
					settled = false
				}
			}
			jobs, _ := w.f.Jobs()
			for _, j := range jobs {
				settled = settled && j.Over()
			}
			for id, b := range w.bmcs {
				if id == dead {
					continue
				}
				h, _ := w.f.hosts.load(id)
				settled = settled && b.p.HardwareOn() && !h.needsKeeping()
			}
			if settled {
				break
			}
			for s := range w.abandoned {
				if h, _ := w.f.hosts.load(s); s != dead && h.Abandoned != "" && !w.bmcs[s].p.HardwareOn() {
					w.bmcs[s].p.OutOfBandOn()
				}
			}
			if _, gaveUp := w.abandoned[dead]; gaveUp && !w.bmcs[dead].p.HardwareOn() {
				// The operator who abandoned it powers it on by hand
				// (it is theirs now): while it is off it counts against
				// the concurrency (ground truth, maxOff), so a plan at
				// concurrency 1 rightly waits for it.
				w.bmcs[dead].p.OutOfBandOn()
			}
			if i == 1500 && dead != "" {
				w.abandoned[dead] = w.clk.Real()
				for _, id := range w.plans {
					if p, err := w.store.Get(w.ctx(), id); err == nil && p.Unfinished() {
						if m.abandons {
							meta[dead] = metaAbandon{plan: id, why: "operator gave up"}
						} else {
							_ = w.f.Abandon(dead, id, "operator gave up")
						}
					}
				}
			}
			if i > 3000 {
				for _, id := range w.plans {
					p, _ := w.store.Get(w.ctx(), id)
					rt.Logf("%s", plan.Table(p))
				}
				jobs, _ := w.f.Jobs()
				var hosts []string
				for _, id := range ids {
					h, _ := w.f.hosts.load(id)
					hosts = append(hosts, fmt.Sprintf("%s: %+v hardware on %v", id, h, w.bmcs[id].p.HardwareOn()))
				}
				rt.Fatalf("not settled after the BMCs behaved: jobs %+v\nhosts %s", jobs, strings.Join(hosts, "\n"))
			}
			w.advance(5 * time.Second)
		}
	})
}
