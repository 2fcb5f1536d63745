package remediation

import (
	"testing"
	"time"
)

// TestReview41e_CancelledAfterPowerOnStartsNewPowerCycle: the health
// checker cancels a remediation (its needs-remediation mark removed: for
// a PowerCycleRemediation, the checker deleted it or NodeHealthCheck timed
// it out) after the host was powered on, while the remediation waits for
// the host to read On or for its Node. When the attempt's timeout passes,
// retryOrEscalate ignores the cancellation (State.Canceled is only set
// in power-off-requested and node-deleted) and starts a new attempt: a new
// reboot request on a host no one wants remediated any more. The seed's
// table never adds a reboot request without the mark; a cancelled
// remediation only brings the host and Node back.
func TestReview41e_CancelledAfterPowerOnStartsNewPowerCycle(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	cfg := Config{Timeout: time.Minute, RetryLimit: 1}
	m := Machine{Name: "m0", UID: "u0", NodeName: "n0", NeedsRemediation: false} // cancelled
	for _, phase := range []Phase{PhasePoweringOn, PhaseWaitingForNode} {
		st := State{Phase: phase, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h0"}
		o := Observed{Machine: m, State: st, Admitted: true,
			Host: Host{Name: "h0"},                // on (or not yet read On), no request on it
			Node: Node{Exists: false, Name: "n0"}} // not back yet
		d := cfg.Decide(o, t0.Add(2*time.Minute)) // the attempt timed out
		if d.AddRebootAnnotation || InFlight(d.State.Phase) && d.State.Attempt > 1 {
			t.Errorf("%s, cancelled: decided a new power cycle (attempt %d, phase %s, add request %v): %s",
				phase, d.State.Attempt, d.State.Phase, d.AddRebootAnnotation, d.Reason)
		}
	}
}
