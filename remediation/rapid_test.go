package remediation_test

import (
	"fmt"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"pgregory.net/rapid"
)

// TestPhasedStateMachine runs the phased remediator in a simulated cluster
// whose world is drawn from the adversary fakes: BMCs that report stale,
// flapping or unknown power states, power faults, a clock stepping at any
// precision, random node failures (fixed by a power cycle or not),
// cancellations, a health checker that re-adds its annotation at any moment
// (also right after success), a second reconciler that runs a whole pass
// between the first one's read and write, and crashes of the remediator
// between any two of its writes and restarts. After every step, against
// ground truth (the fake hardware and the cluster's contents):
//   - a Node is deleted or tainted only while its hardware is off;
//   - at most the limit of remediations are in flight, and at most one
//     control-plane machine, at any instant;
//   - no host is power-cycled more often than attempts were decided for it,
//     no remediation takes more than RetryLimit+1 attempts, and a new
//     remediation (attempt 1) starts only after MinHealthyPeriod of health;
//
// and at the end, once failures stop: every remediation finished or failed,
// every host is on, no reboot annotation is left, no Node carries our taint,
// and every Node that came back has its backed-up labels.
func TestPhasedStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "machines")
		cfg := remediation.Config{
			Timeout:          time.Duration(rapid.IntRange(2, 12).Draw(t, "timeoutMin")) * time.Minute,
			RetryLimit:       rapid.IntRange(-1, 2).Draw(t, "retries"),
			OutOfService:     rapid.Bool().Draw(t, "outOfService"),
			MinHealthyPeriod: time.Duration(rapid.IntRange(1, 60).Draw(t, "minHealthyMin")) * time.Minute,
		}
		limit := rapid.SampledFrom([]remediation.Limit{remediation.MaxCount(1), remediation.MaxCount(2),
			remediation.MaxPercent(40), remediation.MaxPercent(100)}).Draw(t, "limit")
		pcs := make([]fake.PowerConfig, n)
		for i := range pcs {
			pcs[i] = fake.PowerConfig{Lag: time.Duration(rapid.Int64Range(0, int64(5*time.Second)).Draw(t, "lag")),
				Report: fake.DrawReport(t, "report")}
		}
		s := newSimWith(n, cfg, false, limit, func(i int) fake.PowerConfig { return pcs[i] })
		s.boot = time.Duration(rapid.IntRange(10, 120).Draw(t, "boot")) * time.Second
		s.mhcAfter = time.Duration(rapid.IntRange(10, 120).Draw(t, "mhc")) * time.Second

		s.cluster.BeforeNodeFence = func(node string) {
			h := "h" + node[1:]
			if s.powers[h].HardwareOn() {
				t.Fatalf("node %s fenced while host %s runs (ground truth); truth %v", node, h, s.powers[h].Truth())
			}
		}
		rc := cfg.RetryLimit
		if rc == 0 {
			rc = 1
		} else if rc < 0 {
			rc = 0
		}
		budget := map[string]int{}
		last := map[string]remediation.State{}
		account := func() {
			inFlight, cp := 0, 0
			recs, _ := s.cluster.List(s.ctx)
			adm, _ := s.cluster.GetAdmissions(s.ctx)
			for _, r := range recs {
				m, st := r.Machine.Name, r.State
				prev := last[m]
				if st.Phase == remediation.PhasePowerOffRequested &&
					(prev.Phase != remediation.PhasePowerOffRequested || prev.Attempt != st.Attempt || !prev.Started.Equal(st.Started)) {
					budget[m]++
					if st.Attempt == 1 && !prev.Finished.IsZero() && prev.UnhealthyAgain.Sub(prev.Finished) < cfg.MinHealthyPeriod &&
						!prev.UnhealthyAgain.IsZero() {
						t.Fatalf("%s: a new remediation started %v after the last one finished, within MinHealthyPeriod %v",
							m, prev.UnhealthyAgain.Sub(prev.Finished), cfg.MinHealthyPeriod)
					}
				}
				if st.Attempt > rc+1 {
					t.Fatalf("%s: attempt %d, retry limit %d", m, st.Attempt, rc)
				}
				last[m] = st
				if remediation.InFlight(st.Phase) {
					inFlight++
					if r.Machine.ControlPlane {
						cp++
					}
					if !adm.Has(m) {
						t.Fatalf("%s in flight without admission", m)
					}
				}
			}
			if max := limit.Of(n); inFlight > max {
				t.Fatalf("%d remediations in flight, limit %s of %d = %d", inFlight, limit, n, max)
			}
			if cp > 1 {
				t.Fatalf("%d control-plane remediations at once", cp)
			}
			for i := 0; i < n; i++ {
				m, h := fmt.Sprintf("m%d", i), fmt.Sprintf("h%d", i)
				if c := commandCycles(s.powers[h]); c > budget[m] {
					t.Fatalf("%s: %d power cycles, %d attempts decided", h, c, budget[m])
				}
			}
		}

		steps := rapid.IntRange(10, 150).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			m := fmt.Sprintf("m%d", rapid.IntRange(0, n-1).Draw(t, "m"))
			switch rapid.IntRange(0, 11).Draw(t, "action") {
			case 0:
				s.broken[m] = true
			case 1:
				s.broken[m], s.forever[m] = true, true
			case 2:
				s.cluster.SetNeedsRemediation(m, false) // an operator cancels
			case 3:
				s.crashOn = rapid.IntRange(1, 5).Draw(t, "crashAt")
			case 4:
				s.newRemediator(cfg, false, limit)
			case 5:
				h := "h" + m[1:]
				s.powers[h].FailNext(rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "op"),
					fake.Fault{Kind: rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}).Draw(t, "fault"),
						Applied: rapid.Bool().Draw(t, "applied")})
			case 6:
				// The health checker's stale view: it (re-)adds its
				// annotation whatever the Machine's state, also right after
				// a successful remediation.
				s.cluster.SetNeedsRemediation(m, true)
			case 7:
				// A second reconciler runs a whole pass for another Machine
				// between the next read and write of the first.
				s.nested = fmt.Sprintf("m%d", rapid.IntRange(0, n-1).Draw(t, "nested"))
			default:
				s.step(fake.DrawClockMove(t, "dt", false).D + time.Duration(rapid.IntRange(0, 30).Draw(t, "dt"))*time.Second)
			}
			account()
		}

		// Failures stop, the BMCs behave: permanently broken nodes stay
		// broken (their remediation must end in failure, with the host on).
		s.crashOn, s.nested = 0, ""
		for _, p := range s.powers {
			p.SetReport(fake.Report{})
		}
		for i := 0; i < 3000; i++ {
			s.step(5 * time.Second)
			account()
			if settled(s, limit) {
				break
			}
		}
		if !settled(s, limit) {
			t.Fatalf("did not settle: %s", describeSim(s))
		}
		if len(s.failures) > 0 {
			t.Fatalf("errors: %v", s.failures)
		}
		recs, _ := s.cluster.List(s.ctx)
		for _, r := range recs {
			node := s.cluster.Node(r.Machine.NodeName)
			if node.Exists && node.OutOfService {
				t.Fatalf("%s: node left tainted out-of-service in phase %s", r.Machine.Name, r.State.Phase)
			}
			if node.Exists && r.State.Backup != nil && node.Ready {
				t.Fatalf("%s: node back and ready but its backup was not restored (phase %s)", r.Machine.Name, r.State.Phase)
			}
		}
	})
}

// commandCycles counts the power cycles of the hardware (ground truth):
// power-ons that followed a power-off.
func commandCycles(p *fake.Power) int {
	n, wasOff := 0, false
	for _, tc := range p.Truth() {
		if !tc.On {
			wasOff = true
		} else if wasOff {
			n++
			wasOff = false
		}
	}
	return n
}

// settled: no remediation in flight or able to start, every host on, no
// reboot annotation.
func settled(s *sim, limit remediation.Limit) bool {
	recs, _ := s.cluster.List(s.ctx)
	fleet := make([]remediation.FleetMachine, len(recs))
	for i, r := range recs {
		fleet[i] = remediation.FleetMachine{Name: r.Machine.Name, ControlPlane: r.Machine.ControlPlane,
			Unhealthy: r.Machine.NeedsRemediation, Remediating: remediation.InFlight(r.State.Phase)}
	}
	for _, r := range recs {
		if remediation.InFlight(r.State.Phase) {
			return false
		}
		// A Node that is back gets its backup restored by a later pass.
		if node := s.cluster.Node(r.Machine.NodeName); node.Exists && node.Ready && r.State.Backup != nil {
			return false
		}
		if may, _ := remediation.MayStart(fleet, r.Machine.Name, limit); r.Machine.NeedsRemediation &&
			r.State.Phase != remediation.PhaseFailed && may {
			return false
		}
	}
	for i := 0; i < s.n; i++ {
		h, _ := s.hosts.Get(s.ctx, fmt.Sprintf("h%d", i))
		if _, ok := h.Annotations[remediation.RebootAnnotation]; ok || !s.powers[h.Name].HardwareOn() {
			return false
		}
	}
	return true
}

func describeSim(s *sim) string {
	out := ""
	recs, _ := s.cluster.List(s.ctx)
	for _, r := range recs {
		h := "h" + r.Machine.Name[1:]
		hh, _ := s.hosts.Get(s.ctx, h)
		out += fmt.Sprintf("\n%s: NR=%v phase=%s attempt=%d canceled=%v power=%v annotations=%v node=%+v broken=%v forever=%v",
			r.Machine.Name, r.Machine.NeedsRemediation, r.State.Phase, r.State.Attempt, r.State.Canceled,
			s.powers[h].Current(), hh.Annotations, s.cluster.Node("n"+r.Machine.Name[1:]), s.broken[r.Machine.Name], s.forever[r.Machine.Name])
	}
	return out
}
