package remediation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestOverRemediationMovedBlockedFailsAtTimeout: the other side of
// TestReview40o_OverRemediationMovedWithoutPowerStallsForGood. A
// cancelled remediation that is over, whose host h1's BMC refuses the
// power-on (no reading ever confirms it: no Power, and the reboot
// controller never reads it On), and whose Machine now maps to h2 and is
// unhealthy again: h2 is never asked (ground truth: h2 never off), and
// the remediation fails within a few timeouts with a message naming h1
// and what would confirm it, instead of waiting for ever (the old code).
func TestOverRemediationMovedBlockedFailsAtTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const timeout = 500 * time.Millisecond
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: timeout})
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	g.cluster.SetNeedsRemediation("m1", false) // cancelled after the power-off
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && g.state().Phase != remediation.PhaseDone {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	require40(t, g.state().Phase == remediation.PhaseDone, "precondition: the cancelled remediation ended: %+v", g.state())
	from := time.Now()
	g.hostOf.Store("h2")
	g.cluster.SetNeedsRemediation("m1", true)
	end := time.Now().Add(8 * timeout)
	var waiting string
	for time.Now().Before(end) && g.state().Phase != remediation.PhaseFailed {
		_, _ = g.rem.Reconcile(ctx, "m1")
		if st := g.state(); st.Phase == remediation.PhaseDone && strings.Contains(st.Message, "waiting") {
			waiting = st.Message
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := g.state()
	if g.hw["h2"].WasOffDuring(from, time.Now()) || st.Host == "h2" {
		t.Fatalf("h2 asked (truth %v) while h1 is off for the request and never on since (truth %v)", g.hw["h2"].Truth(), g.hw["h1"].Truth())
	}
	if st.Phase != remediation.PhaseFailed || !strings.Contains(st.Message, "h1") || !strings.Contains(st.Message, "RebootAPIHosts.Power") {
		t.Fatalf("after %d timeouts: want failed naming h1 and RebootAPIHosts.Power; got %s: %q", 8, st.Phase, st.Message)
	}
	if !strings.Contains(waiting, "h1") || !strings.Contains(waiting, "until") {
		t.Errorf("while waiting, State.Message %q does not say what it waits for and until when", waiting)
	}
}

func require40(t *testing.T, ok bool, f string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(f, args...)
	}
}
