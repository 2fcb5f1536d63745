package remediation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// readOutage40o is a host's power controller as the remediation reads it:
// its State fails while down is set (a BMC that does not answer reads).
type readOutage40o struct {
	*fake.Power
	down *atomic.Bool
}

func (r readOutage40o) State(ctx context.Context) (power.State, error) {
	if r.down.Load() {
		return power.StateUnknown, errors.New("bmc: no answer")
	}
	return r.Power.State(ctx)
}

// TestReview40o_DeletedMachineReleasedHostHeldForGood: RebootAPIHosts's
// OwnerOnline doc: "A host with Online false and no request of the
// Machine's on it is then Host.Offline, not held ... so a Machine deleted
// after its host was released and deprovisioned gives its admission
// back." 76c7b57 made held() honour RebootPending over Offline and made
// RebootAPIHosts (with Power, which kube.SetRemediationPower and
// rebootkit-controller set) synthesize RebootPending for any recorded
// power-on after the request's power-off that no On reading confirms and
// no Status.OfflineSince follows. A host whose BMC refused the power-on
// (why the remediation failed and its Machine is being replaced) and
// which its owner then releases (spec.online false) was off when Online
// went false, so the reboot controller never writes OfflineSince: the
// synthesized RebootPending holds it for as long as it stays in the pool.
// This is review 40l's DeletedMachineDeprovisionedHostHeldForGood
// (fixed for kube.OperatorHosts by the provisioning state) again, for the
// hosts rebootkit drives. Ground truth: h1 off, Online false, no request
// on it, no reboot pending in the controller's own status
// (Status.Pending false): kept off by its owner. Under MaxCount(1) no
// other Machine is ever remediated.
func TestReview40o_DeletedMachineReleasedHostHeldForGood(t *testing.T) {
	ctx := context.Background()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second, RetryLimit: -1})
	g.rh.Power = func(h string) (power.Controller, error) { return g.hw[h], nil }
	g.rh.StaleReads = 100 * time.Millisecond // the reboot controller's
	g.rh.OwnerOnline = true                  // as kube.NewRemediationReconciler sets it
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", HasControllerOwner: true})
	g.startOnH1(t, true)
	// h1's BMC refuses every power-on from now on (why it is replaced).
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		_ = g.pass(t)
		if _, err := g.cluster.Get(ctx, "m1"); err != nil {
			break // deleted by the escalation, for its owner to replace
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := g.cluster.Get(ctx, "m1")
	require.Error(t, err, "precondition: the remediation failed and deleted the Machine for its owner")
	a, _ := g.cluster.GetAdmissions(ctx)
	require.True(t, a.Has("m1"), "precondition: m1's admission kept while h1 is off for its request")

	// Its owner (CAPM3) releases h1: spec.online false, no consumer; it is
	// deprovisioned and kept off.
	g.hostOf.Store("")
	require.NoError(t, g.hosts.(*fake.RebootHosts).Mutate("h1", func(h *reboot.Host) { h.Online = false }))
	from := time.Now()
	for i := 0; i < 60; i++ {
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	h1, _ := g.hosts.Get(ctx, "h1")
	a, _ = g.cluster.GetAdmissions(ctx)
	_, req := h1.Annotations[remediation.RebootAnnotation]
	t.Logf("h1 online=%v request=%v pending=%v status=%+v admitted=%v truth=%v", h1.Online, req, h1.Status.Pending(), h1.Status, a.Has("m1"), g.hw["h1"].Truth())
	if a.Has("m1") && !h1.Online && !req && !h1.Status.Pending() && g.hw["h1"].OffThroughout(from, time.Now()) {
		t.Fatalf("h1 released by its owner (online false, no request, no reboot pending in the controller's status) and kept off for it (truth %v), "+
			"yet the deleted Machine m1 keeps its admission for as long as h1 stays in the pool: RebootAPIHosts synthesizes RebootPending (no OfflineSince: h1 was already off when Online went false)",
			g.hw["h1"].Truth())
	}
}
