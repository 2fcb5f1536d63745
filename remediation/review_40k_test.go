package remediation_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40k_HostReleasedThenCancelledReleasesWhileOff: doc.go,
// Guarantees: "At most the storm guard's limit of remediations ... are in
// flight at any instant" and "A remediation cancelled mid-way ... stays
// in flight, admitted, until the reboot controller powered the host on
// ...: it releases its admission only then, so a host a cancelled
// remediation may have powered off still counts against the storm
// guard"; "A remediation that is over without its host known on ...
// keeps its admission while its host is held (... off after its request
// and not Host.PoweredOn since)". m1's request was written to h1 and the
// reboot controller powered h1 off; then m1's HostOf answers "" (its
// BareMetalHost released from it: Host.Missing, while the request's host
// h1 is still read through State.Host) and its mark is cleared. The
// cancel takes phased.go's PowerOffRequested case `!m.NeedsRemediation
// && o.Host.Missing` ("no host: nothing was or can be powered off"):
// Done with `d.Release = o.Admitted`, whatever h1's evidence says
// (OffAfterRequest); held (held.go) also answers false for any Missing
// host, so retryOrEscalate and escalate release the same way. h1's BMC
// refuses power-on (the fault still on): with MaxCount(1), m2 is admitted
// and h2 powered off while h1 is still off. Ground truth: both fake
// hardwares off at once.
func TestReview40k_HostReleasedThenCancelledReleasesWhileOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	var m1Host atomic.Value
	m1Host.Store("h1")
	g.rh.HostOf = func(_ context.Context, m string) (string, error) {
		if m == "m1" {
			return m1Host.Load().(string), nil
		}
		return map[string]string{"m2": "h2"}[m], nil
	}
	g.startOnH1(t, true)
	// h1's BMC refuses power-on from now on.
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	// m1's host is released from it, and its mark cleared.
	m1Host.Store("")
	g.cluster.SetNeedsRemediation("m1", false)
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 is still off (its BMC refuses On)")

	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	res, err := g.rem.Reconcile(context.Background(), "m2")
	t.Logf("m2's pass: %v, %s", err, res.Decision.Reason)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !g.hw["h1"].HardwareOn() && !g.hw["h2"].HardwareOn() {
			a, _ := g.cluster.GetAdmissions(context.Background())
			t.Fatalf("limit MaxCount(1): m1's cancelled remediation released its admission (state %+v) while h1, which its request powered off, is still off (BMC refusing On), and m2 was admitted (%v): h1 and h2 off at once; truths h1 %v h2 %v",
				g.state(), a.Machines, g.hw["h1"].Truth(), g.hw["h2"].Truth())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a, _ := g.cluster.GetAdmissions(context.Background())
	require.False(t, a.Has("m2"), "m2 admitted while h1 is off after m1's request")
}
