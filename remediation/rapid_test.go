package remediation_test

import (
	"fmt"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
	"pgregory.net/rapid"
)

// TestPhasedStateMachine runs the phased remediator in a simulated cluster
// with random node failures (fixed by a power cycle or not), cancellations,
// crashes of the remediator between any two of its writes, restarts, power
// faults and health-checker timeouts, and checks after every step:
//   - a Node is deleted or tainted only while its host is off;
//   - the storm guard's limit on remediations in flight is never exceeded,
//     and at most one control-plane machine is remediated at a time;
//   - no host is power-cycled more often than the remediations and retries
//     that were decided for it;
//
// and at the end, with failures stopped: every remediation finished or
// failed, no host is left off, no reboot annotation is left.
func TestPhasedStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "machines")
		cfg := remediation.Config{
			Timeout:      time.Duration(rapid.IntRange(2, 12).Draw(t, "timeoutMin")) * time.Minute,
			RetryLimit:   rapid.IntRange(-1, 2).Draw(t, "retries"),
			OutOfService: rapid.Bool().Draw(t, "outOfService"),
		}
		limit := rapid.SampledFrom([]remediation.Limit{remediation.MaxCount(1), remediation.MaxCount(2),
			remediation.MaxPercent(40), remediation.MaxPercent(100)}).Draw(t, "limit")
		s := newSim(n, cfg, false, limit)
		s.boot = time.Duration(rapid.IntRange(10, 120).Draw(t, "boot")) * time.Second
		s.mhcAfter = time.Duration(rapid.IntRange(10, 120).Draw(t, "mhc")) * time.Second

		s.cluster.BeforeNodeFence = func(node string) {
			h := "h" + node[1:]
			if p := s.powers[h].Current(); p != power.StateOff {
				t.Fatalf("node %s fenced while host %s is %v", node, h, p)
			}
		}
		budget := map[string]int{}
		last := map[string]remediation.State{}
		account := func() {
			inFlight, cp := 0, 0
			recs, _ := s.cluster.List(s.ctx)
			for _, r := range recs {
				m, st := r.Machine.Name, r.State
				prev := last[m]
				if st.Phase == remediation.PhasePowerOffRequested &&
					(prev.Phase != remediation.PhasePowerOffRequested || prev.Attempt != st.Attempt) {
					budget[m]++
				}
				last[m] = st
				if remediation.InFlight(st.Phase) {
					inFlight++
					if r.Machine.ControlPlane {
						cp++
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
				if c := s.powers[h].Cycles(); c > budget[m] {
					t.Fatalf("%s: %d power cycles, %d decided", h, c, budget[m])
				}
			}
		}

		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			m := fmt.Sprintf("m%d", rapid.IntRange(0, n-1).Draw(t, "m"))
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0:
				s.broken[m] = true
			case 1:
				s.broken[m], s.forever[m] = true, true
			case 2:
				s.cluster.SetNeedsRemediation(m, false) // an operator cancels
			case 3:
				s.crashOn = rapid.IntRange(1, 4).Draw(t, "crashAt")
			case 4:
				s.newRemediator(cfg, false, limit)
			case 5:
				h := "h" + m[1:]
				s.powers[h].FailNext(rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "op"),
					fake.Fault{Kind: rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}).Draw(t, "fault")})
			default:
				s.step(time.Duration(rapid.IntRange(1, 30).Draw(t, "dt")) * time.Second)
			}
			account()
		}

		// Failures stop: permanently broken nodes stay broken (their
		// remediation must end in failure, not with a host left off).
		s.crashOn = 0
		for i := 0; i < 2000; i++ {
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
	})
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
		if may, _ := remediation.MayStart(fleet, r.Machine.Name, limit); r.Machine.NeedsRemediation &&
			r.State.Phase != remediation.PhaseFailed && may {
			return false
		}
	}
	for i := 0; i < s.n; i++ {
		h, _ := s.hosts.Get(s.ctx, fmt.Sprintf("h%d", i))
		if _, ok := h.Annotations[remediation.RebootAnnotation]; ok || s.powers[h.Name].Current() != power.StateOn {
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
