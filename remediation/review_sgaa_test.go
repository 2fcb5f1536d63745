package remediation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// sgaaStuck wraps a fake Power whose BMC, once stuck, reads
// Transitioning for ever (a BMC stuck mid power change), whatever the
// hardware does: the ground truth stays the fake's (HardwareOn).
type sgaaStuck struct {
	*fake.Power
	stuck *bool
}

func (s sgaaStuck) State(ctx context.Context) (power.State, error) {
	if *s.stuck {
		return power.StateTransitioning, nil
	}
	return s.Power.State(ctx)
}

// sgaaWorld: machines m0 (host h0) and m1 (host h1) under the reboot
// controller and the remediation reconciler on one fake clock, storm
// guard limit 1.
type sgaaWorld struct {
	t       *testing.T
	ctx     context.Context
	clk     *fake.Clock
	c       *fake.Cluster
	hosts   *fake.RebootHosts
	powers  map[string]*fake.Power
	stuck   map[string]*bool
	refuse  map[string]bool
	reboots *reboot.Reconciler
	rem     *remediation.Reconciler
}

func newSgaaWorld(t *testing.T, withPower bool) *sgaaWorld {
	w := &sgaaWorld{t: t, ctx: context.Background(), clk: fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), c: fake.NewCluster(),
		powers: map[string]*fake.Power{}, stuck: map[string]*bool{}, refuse: map[string]bool{}}
	ctl := func(h string) (power.Controller, error) { return sgaaStuck{w.powers[h], w.stuck[h]}, nil }
	var hs []reboot.Host
	for _, h := range []string{"h0", "h1"} {
		h := h
		hs = append(hs, reboot.Host{Name: h, Online: true})
		w.stuck[h] = new(bool)
		w.powers[h] = fake.NewPower(w.clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
			if c.Op == fake.OpOn && w.refuse[h] {
				return fake.Fault{Kind: fake.FaultFailed}
			}
			return fake.Fault{}
		}})
	}
	w.hosts = fake.NewRebootHosts(hs...)
	for i := 0; i < 2; i++ {
		m := fmt.Sprintf("m%d", i)
		w.c.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: m, Cluster: "c", HasControllerOwner: true})
		w.c.PutNode(remediation.Node{Name: m, UID: "n-" + m, Ready: true})
	}
	w.reboots = &reboot.Reconciler{Hosts: w.hosts, Now: w.clk.Now, Monotonic: w.clk.Monotonic, Power: ctl}
	var readPower func(string) (power.Controller, error)
	if withPower {
		readPower = ctl
	}
	w.rem = &remediation.Reconciler{Machines: w.c, Nodes: w.c.Nodes(), Admissions: w.c, Now: w.clk.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: w.hosts, Now: w.clk.Now, Power: readPower, HostsMayVanish: true,
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{Timeout: 3 * time.Minute, RetryLimit: 0, MinHealthyPeriod: 20 * time.Minute}}
	return w
}

// taken reports, by ground truth, the hosts off or with a remediation
// request on them (about to go off).
func (w *sgaaWorld) taken() []string {
	var out []string
	for _, h := range []string{"h0", "h1"} {
		hh, _ := w.hosts.Get(w.ctx, h)
		if _, req := hh.Annotations[remediation.RebootAnnotation]; req || !w.powers[h].HardwareOn() {
			out = append(out, h)
		}
	}
	return out
}

func (w *sgaaWorld) step(d time.Duration) {
	w.clk.Advance(d)
	for _, h := range []string{"h0", "h1"} {
		if _, err := w.reboots.Reconcile(w.ctx, h); err != nil && !errors.Is(err, reboot.ErrConflict) {
			w.t.Logf("reboot %s: %v", h, err)
		}
	}
	for _, m := range []string{"m0", "m1"} {
		if _, err := w.rem.Reconcile(w.ctx, m); err != nil && !errors.Is(err, remediation.ErrConflict) && !errors.Is(err, remediation.ErrNotFound) {
			w.t.Logf("remediation %s: %v", m, err)
		}
	}
}

// TestReviewSgaa_StuckTransitioningBMCReleasesOffHost: m0's host h0 is
// powered off for its remediation's request, and its BMC then reads
// Transitioning for ever and refuses power-ons (hardware off: ground
// truth). The reboot controller never gets the Off reading its evidence
// (Status.LastPoweredOff) needs; once the request is removed (the
// attempt timed out) it ends the reboot with a power-on the BMC refuses
// (LastPoweredOn written). The "power-on never read On" rule
// (RebootAPIHosts.read, now also for a power-off before the request:
// offAt) needs a recorded power-off, so h0 is not counted: m0's
// admission is released while h0 is off, and m1 is admitted and its host
// powered off: two hosts off with a limit of 1.
func TestReviewSgaa_StuckTransitioningBMCReleasesOffHost(t *testing.T) {
	for _, withPower := range []bool{true, false} {
		t.Run(fmt.Sprintf("power=%v", withPower), func(t *testing.T) {
			w := newSgaaWorld(t, withPower)
			w.c.SetNodeReady("m0", false)
			w.c.SetNeedsRemediation("m0", true)
			var stuckAt time.Time
			for i := 0; i < 720; i++ { // 2 h of 10 s steps
				w.step(10 * time.Second)
				if stuckAt.IsZero() && !w.powers["h0"].HardwareOn() {
					*w.stuck["h0"], w.refuse["h0"] = true, true
					stuckAt = w.clk.Now()
					// m1 fails too: waits for the storm guard.
					w.c.SetNodeReady("m1", false)
					w.c.SetNeedsRemediation("m1", true)
				}
				if tk := w.taken(); len(tk) > 1 {
					hh, _ := w.hosts.Get(w.ctx, "h0")
					adm, _ := w.c.GetAdmissions(w.ctx)
					rec0, _ := w.c.Get(w.ctx, "m0")
					t.Fatalf("at %v (%v after h0's BMC stuck): hosts %v off or requested by ground truth (h0 on=%v, h1 on=%v), limit 1; admissions %v; m0 %s; h0 status %+v",
						w.clk.Now(), w.clk.Now().Sub(stuckAt), tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), adm.Machines, rec0.State.Phase, hh.Status)
				}
			}
			if stuckAt.IsZero() {
				t.Fatal("h0 never powered off for m0's remediation")
			}
			hh, _ := w.hosts.Get(w.ctx, "h0")
			adm, _ := w.c.GetAdmissions(w.ctx)
			rec0, _ := w.c.Get(w.ctx, "m0")
			rec1, _ := w.c.Get(w.ctx, "m1")
			t.Logf("end: stuck at %v; admissions %v; m0 %s %q; m1 %s %q; h0 status %+v ann %v", stuckAt, adm.Machines, rec0.State.Phase, rec0.State.Message, rec1.State.Phase, rec1.State.Message, hh.Status, hh.Annotations)
			if w.powers["h0"].HardwareOn() {
				t.Fatalf("h0 on again: the scenario did not hold h0 off")
			}
		})
	}
}
