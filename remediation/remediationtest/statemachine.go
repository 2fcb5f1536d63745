package remediationtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/remediation"
)

// World is how StateMachine plays the rest of the cluster on your stores:
// the health checker that marks machines, an operator who cancels, and the
// kubelets that register nodes and report them ready. Its writes must show
// at once in the stores' reads.
type World interface {
	// SetNeedsRemediation marks (on) or unmarks a machine as needing
	// remediation.
	SetNeedsRemediation(ctx context.Context, machine string, on bool) error
	// PutNode registers the node n (a new registration: a new UID).
	PutNode(ctx context.Context, n remediation.Node) error
	// SetNodeReady sets the readiness of an existing node.
	SetNodeReady(ctx context.Context, node string, ready bool) error
}

var errCrash = errors.New("remediationtest: crashed")

// StateMachine is the property test of the remediation Reconciler over
// your stores (remediation's TestPhasedStateMachine runs it on the fake
// Cluster); Stores.World must be set. Machines m<i> on hosts h<i> (fake
// power whose BMCs report stale, flapping or unknown states, with power
// faults) with nodes of the machines' names; a reboot Reconciler over a
// fake reboot store; kubelets that register a node some time after their
// host is on (unless the node is broken; a power cycle fixes it, or not);
// a health checker that marks machines, also right after a success; an
// operator who cancels; a second remediation Reconciler that runs a whole
// pass between the first one's read and its write (through your stores);
// crashes between any two writes, and restarts. After every step, against
// ground truth (the fake hardware, and your stores read directly):
//   - a node is deleted or tainted only while its hardware is off;
//   - at most the limit of remediations are in flight, and at most one
//     control-plane machine, and each has its admission;
//   - no host is power-cycled more often than attempts were decided for
//     it, no remediation takes more than RetryLimit+1 attempts, and a new
//     remediation (attempt 1) starts only after MinHealthyPeriod of health;
//   - by ground truth over the hardware's whole history, never more hosts
//     off at once than the limit, and every host off is one whose machine
//     is admitted (the storm guard counts it);
//
// and at the end, once the BMCs behave and crashes stop (a store write
// still failing now and then, the second reconciler still running its
// passes in between): every remediation finished or failed, every host
// is on, no reboot annotation is left, no node carries the taint, and
// every node that came back has its backed-up labels. With
// Stores.SingleRecord, nodes are never deleted (Config.OutOfService).
func StateMachine(t *testing.T, newStores NewStores) {
	rapidcheck.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "machines")
		cfg := remediation.Config{
			Timeout:          time.Duration(rapid.IntRange(2, 12).Draw(t, "timeoutMin")) * time.Minute,
			RetryLimit:       rapid.IntRange(-1, 2).Draw(t, "retries"),
			OutOfService:     rapid.Bool().Draw(t, "outOfService"),
			MinHealthyPeriod: time.Duration(rapid.IntRange(1, 60).Draw(t, "minHealthyMin")) * time.Minute,
		}
		limit := rapid.SampledFrom([]remediation.MaxUnhealthy{remediation.MaxCount(1), remediation.MaxCount(2),
			remediation.MaxPercent(40), remediation.MaxPercent(100)}).Draw(t, "limit")
		pcs := make([]fake.PowerConfig, n)
		for i := range pcs {
			pcs[i] = fake.PowerConfig{Lag: time.Duration(rapid.Int64Range(0, int64(5*time.Second)).Draw(t, "lag")),
				Report: fake.DrawReport(t, "report")}
		}
		s, err := newWorld(t, newStores, n, cfg, limit, pcs)
		if err != nil {
			t.Fatalf("new stores: %v", err)
		}
		if s.stores.Close != nil {
			defer s.stores.Close()
		}
		cfg = s.cfg
		s.boot = time.Duration(rapid.IntRange(10, 120).Draw(t, "boot")) * time.Second
		s.mhcAfter = time.Duration(rapid.IntRange(10, 120).Draw(t, "mhc")) * time.Second
		s.beforeFence = func(node string) {
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
			recs, err := s.machines.List(s.ctx)
			if err != nil {
				t.Fatalf("Machines.List: %v", err)
			}
			adm, err := s.stores.Admissions.GetAdmissions(s.ctx)
			if err != nil {
				t.Fatalf("GetAdmissions: %v", err)
			}
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
			// Ground truth: only remediations power hosts off here, so
			// every host off is one an admitted machine's remediation
			// holds, and never more at once than the limit (over time,
			// not only at this instant: the hardware's whole history).
			if off, at := s.maxOff(); off > limit.Of(n) {
				t.Fatalf("%d hosts off at once at %v (ground truth), limit %s of %d = %d; admissions %v%s",
					off, at, limit, n, limit.Of(n), adm.Machines, s.describe())
			}
			for i := 0; i < n; i++ {
				if m, h := fmt.Sprintf("m%d", i), fmt.Sprintf("h%d", i); !s.powers[h].HardwareOn() && !adm.Has(m) {
					t.Fatalf("host %s is off (ground truth %v) but %s is not admitted: the storm guard does not count it; admissions %v%s",
						h, s.powers[h].Truth(), m, adm.Machines, s.describe())
				}
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
				s.mark(m, false) // an operator cancels
			case 3:
				s.crashOn = rapid.IntRange(1, 5).Draw(t, "crashAt")
			case 4:
				s.rem = s.remediator() // a restart
			case 5:
				h := "h" + m[1:]
				s.powers[h].FailNext(rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "op"),
					fake.Fault{Kind: rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}).Draw(t, "fault"),
						Applied: rapid.Bool().Draw(t, "applied")})
			case 6:
				// The health checker's stale view: it (re-)adds its mark
				// whatever the machine's state, also right after a
				// successful remediation.
				s.mark(m, true)
			case 7:
				// A second reconciler runs a whole pass for another machine
				// between the next read and write of the first.
				s.nested = fmt.Sprintf("m%d", rapid.IntRange(0, n-1).Draw(t, "nested"))
			default:
				s.step(fake.DrawClockMove(t, "dt", false).D + time.Duration(rapid.IntRange(0, 30).Draw(t, "dt"))*time.Second)
			}
			account()
		}

		// The BMCs behave and crashes stop, but the faults the design
		// must survive stay on: a store write of the remediators fails
		// now and then, and the second reconciler goes on running whole
		// passes between the first one's reads and writes. Permanently
		// broken nodes stay broken (their remediation must end in
		// failure, with the host on). The faults are seeded from what was
		// drawn, not drawn themselves (the committed failure files replay).
		s.crashOn, s.nested = 0, ""
		s.flaky, s.flakyRate = rand.New(rand.NewPCG(uint64(steps), uint64(n))), 8
		for _, p := range s.powers {
			p.SetReport(fake.Report{})
		}
		for i := 0; i < 3000; i++ {
			if i%3 == 0 {
				s.nested = fmt.Sprintf("m%d", s.flaky.IntN(n))
			}
			s.step(5 * time.Second)
			account()
			if s.settled(limit) {
				break
			}
		}
		if !s.settled(limit) {
			t.Fatalf("did not settle: %s", s.describe())
		}
		if len(s.failures) > 0 {
			t.Fatalf("errors: %v", s.failures)
		}
		recs, _ := s.machines.List(s.ctx)
		for _, r := range recs {
			node := s.node(r.Machine.NodeName)
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
