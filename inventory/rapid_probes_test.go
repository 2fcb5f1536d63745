package inventory

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/plan"
)

// probe is a health check the world started and has not delivered yet:
// its answer (ground truth when it started) and when it started.
type probe struct {
	ok bool
	at time.Duration
}

// TestJobStateMachineSlowProbes drives a plan over servers whose health
// probes are slow (a probe reads the server when it starts and answers
// when the world says, a round of probes taking longer than HealthMaxAge)
// while servers crash and come back on their own. Against ground truth
// (the fake hardware): whenever the executor powers a server off, the
// servers really off at that instant, besides it, are fewer than the
// concurrency, not counting a server that crashed after the last instant
// its start could have seen it (HealthMaxAge before the job was created).
// Liveness: once probes answer and crashed servers are back, the plan
// ends (issue 38, A.9; with the age bound removed from healthOf, a server
// probed up and crashed since counted as up for ever and a second server
// was powered off next to it at concurrency 1).
func TestJobStateMachineSlowProbes(t *testing.T) {
	rapidcheck.Check(t, func(rt *rapid.T) {
		w := &world{t: rt, clk: fake.NewClock(time.Time{}), bmcs: map[string]*advBMC{}, store: fake.NewPlanStore(),
			cancelAt: map[string]int{}, jobStart: map[string]int{}, offMark: map[string]int{}, slowProbes: true}
		w.path = filepath.Join(t.TempDir(), fmt.Sprintf("fleet-%d.db", time.Now().UnixNano()))
		n := rapid.IntRange(2, 4).Draw(rt, "servers")
		w.conc = rapid.IntRange(1, 2).Draw(rt, "concurrency")
		w.budget = n
		w.bootTime = time.Duration(rapid.IntRange(0, 30).Draw(rt, "bootSeconds")) * time.Second
		w.cfg = plan.Config{DrainTimeout: 10 * time.Minute, JobTimeout: 20 * time.Minute, ServicesTimeout: 10 * time.Minute}
		var ids []string
		for i := range n {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			ids = append(ids, id)
			w.bmcs[id] = &advBMC{p: fake.NewPower(w.clk.Real, fake.PowerConfig{Lag: time.Duration(rapid.IntRange(0, 5).Draw(rt, "lag")) * time.Second})}
			w.inv.Servers = append(w.inv.Servers, Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1",
				BMC: BMC{Redfish: "https://bmc" + id, Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"}})
		}
		w.open()
		defer func() { _ = w.f.Close() }()
		maxAge := w.f.opts.HealthMaxAge
		w.newPlan()
		pending := map[string]probe{}
		crashed := map[string]bool{}
		start := func(id string) {
			if _, busy := pending[id]; !busy {
				pending[id] = probe{ok: w.healthNow(id) == nil, at: w.clk.Monotonic()}
			}
		}
		deliver := func(id string) {
			if p, ok := pending[id]; ok {
				w.f.probeResult(id, p.ok, p.at)
				delete(pending, id)
			}
		}
		// A round of probes takes lag: each server's probe answers lag
		// after it started, and the next starts then.
		lag := time.Duration(rapid.IntRange(0, 40).Draw(rt, "probeLagSeconds")) * time.Second
		tick := func() {
			for _, id := range ids {
				if p, ok := pending[id]; ok && w.clk.Monotonic()-p.at >= lag {
					deliver(id)
				}
				start(id)
			}
		}
		check := func() {
			if v := offBeyondConcurrency(w, ids, maxAge); v != "" {
				rt.Fatalf("%s", v)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"work": func(*rapid.T) {
				// A few passes and steps, a second apart: a job goes
				// from its start to the power-off.
				for range 4 {
					w.pass()
					w.stepAll(ids)
					check()
					w.clk.Advance(time.Second)
					tick()
				}
			},
			"time": func(t *rapid.T) {
				w.clk.Advance(time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(40*time.Second)).Draw(t, "advance")))
				tick()
			},
			"crash": func(t *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(t, "crash")
				if w.bmcs[id].p.HardwareOn() {
					w.bmcs[id].p.OutOfBandOff()
					crashed[id] = true
				}
			},
			"recover": func(t *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(t, "recover")
				if crashed[id] {
					w.bmcs[id].p.OutOfBandOn()
					delete(crashed, id)
				}
			},
			"": func(*rapid.T) { check() },
		})
		for id := range crashed {
			if !w.bmcs[id].p.HardwareOn() {
				w.bmcs[id].p.OutOfBandOn()
			}
		}
		for i := 0; ; i++ {
			for _, id := range ids {
				start(id)
				deliver(id)
			}
			w.pass()
			w.stepAll(ids)
			check()
			p, err := w.store.Get(w.ctx(), w.plans[0])
			if err == nil && !p.Unfinished() {
				break
			}
			if i > 2000 {
				rt.Fatalf("the plan did not end once probes answered:\n%s", plan.Table(p))
			}
			w.clk.Advance(5 * time.Second)
		}
	})
}

func (w *world) stepAll(ids []string) {
	for _, id := range ids {
		w.step(id)
	}
}

// offBeyondConcurrency checks the ground truth: at every power-off a
// command caused, the other servers off at that instant are fewer than
// the concurrency, not counting a server whose crash came after the
// instant the power-off's job was decided less maxAge (what a start could
// not have seen). It returns the violation, "" if none.
func offBeyondConcurrency(w *world, ids []string, maxAge time.Duration) string {
	jobs, err := w.f.Jobs()
	if err != nil {
		return "jobs: " + err.Error()
	}
	for _, y := range ids {
		for _, tc := range w.bmcs[y].p.Truth() {
			if tc.On || tc.Cause != fake.CauseCommand {
				continue
			}
			// The job that powered it off: the last created before.
			var decided time.Time
			for _, j := range jobs {
				if j.Server == y && !j.Created.After(tc.At) && j.Created.After(decided) {
					decided = j.Created
				}
			}
			var off []string
			for _, x := range ids {
				if x == y {
					continue
				}
				var last *fake.TruthChange
				for _, xc := range w.bmcs[x].p.Truth() {
					if !xc.At.After(tc.At) {
						last = &xc
					}
				}
				if last == nil || last.On {
					continue
				}
				if last.Cause == fake.CauseOutOfBand && !last.At.Before(decided.Add(-maxAge)) {
					continue // crashed after what the start could see
				}
				off = append(off, fmt.Sprintf("%s (off since %s, %s)", x, last.At.Format("15:04:05"), last.Cause))
			}
			if len(off)+1 > w.conc {
				sort.Strings(off)
				return fmt.Sprintf("%s powered off at %s (its job decided at %s) while %v were off: %d off, concurrency %d",
					y, tc.At.Format("15:04:05"), decided.Format("15:04:05"), off, len(off)+1, w.conc)
			}
		}
	}
	return ""
}

// TestStaleProbeOfCrashedServer: at concurrency 1, both servers probed
// up; the second crashes and no probe answers for 30 s: the plan starts
// nothing, the crashed server's result being older than HealthMaxAge
// (issue 38, A.9; with the age bound removed from healthOf the first
// server was powered off next to the crashed one).
func TestStaleProbeOfCrashedServer(t *testing.T) {
	w := &world{t: t, clk: fake.NewClock(time.Time{}), bmcs: map[string]*advBMC{}, store: fake.NewPlanStore(),
		cancelAt: map[string]int{}, jobStart: map[string]int{}, offMark: map[string]int{}, slowProbes: true}
	w.path = filepath.Join(t.TempDir(), "f.db")
	w.conc, w.budget = 1, 2
	w.cfg = plan.Config{DrainTimeout: 10 * time.Minute, JobTimeout: 20 * time.Minute, ServicesTimeout: 10 * time.Minute}
	var ids []string
	for i := range 2 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		ids = append(ids, id)
		w.bmcs[id] = &advBMC{p: fake.NewPower(w.clk.Real, fake.PowerConfig{})}
		w.inv.Servers = append(w.inv.Servers, Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1",
			BMC: BMC{Redfish: "https://bmc" + id, Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"}})
	}
	w.open()
	defer w.close()
	w.newPlan()
	for _, id := range ids {
		w.f.probeResult(id, true, w.clk.Monotonic())
	}
	w.bmcs[ids[1]].p.OutOfBandOff()
	w.clk.Advance(30 * time.Second)
	for i := 0; i < 20; i++ {
		w.pass()
		w.stepAll(ids)
		w.clk.Advance(time.Second)
		if v := offBeyondConcurrency(w, ids, w.f.opts.HealthMaxAge); v != "" {
			t.Fatal(v)
		}
	}
	p, _ := w.store.Get(w.ctx(), w.plans[0])
	if p.Reboots[0].Step != plan.StepPending {
		t.Fatalf("a reboot started while a server had not been seen for 30 s:\n%s", plan.Table(p))
	}
}
