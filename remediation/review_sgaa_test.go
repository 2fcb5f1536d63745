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

// TestReviewSgaa_GoneMemberNoTimeDeadBMCHoldsForEver (fa4b924,
// Member.movedFrom): m0 is gone; its admission (an earlier version's
// Member: PrevHost h1, no PrevHostSince) records a request without a
// time (a failed remediation cleared). h1 is m1's host now: m1's reboot
// powered it off and on long after m0 was deleted, the reboot
// controller confirmed it On (Status.OnConfirmed == LastPoweredOn), and
// its BMC has failed every read since (a dead BMC, the hardware on:
// ground truth). movedFrom now reads h1 from knownEarliest with the
// request taken as found there, and with Power an unread host is not
// powered on: m0's admission is kept for as long as h1's BMC is dead,
// and m2, unhealthy on a healthy BMC, is never admitted (limit 1) while
// no host is off. On main (no time: not read) m0 is released.
func TestReviewSgaa_GoneMemberNoTimeDeadBMCHoldsForEver(t *testing.T) {
	sgaaGoneMemberNoTime(t, false)
}

// TestReviewSgaa_GoneMemberNoTimeParkedHostHoldsForEver: as
// TestReviewSgaa_GoneMemberNoTimeDeadBMCHoldsForEver with no fault: h1's
// BMC reads fine, and h1's owner keeps it powered off (Online false, its
// controller powered it off: ground truth off) long after its last
// reboot, for no request of m0's ("its owner's, not this Machine's to
// count", doc.go). m0's admission is kept as long as h1 is parked.
func TestReviewSgaa_GoneMemberNoTimeParkedHostHoldsForEver(t *testing.T) {
	sgaaGoneMemberNoTime(t, true)
}

func sgaaGoneMemberNoTime(t *testing.T, parked bool) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t0 := clk.Now()
	st1 := reboot.Status{LastPoweredOff: t0.Add(-10 * time.Minute), LastPoweredOn: t0.Add(-9 * time.Minute), OnConfirmed: t0.Add(-9 * time.Minute),
		PendingRebootSince: t0.Add(-11 * time.Minute), LastRequestSeen: t0.Add(-11 * time.Minute)}
	if parked {
		st1.OfflineSince = t0.Add(-5 * time.Minute)
	}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h0", Online: true}, reboot.Host{Name: "h1", Online: !parked, Status: st1}, reboot.Host{Name: "h2", Online: true})
	powers := map[string]*fake.Power{}
	for _, h := range []string{"h0", "h1", "h2"} {
		h := h
		powers[h] = fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
			if h == "h1" && c.Op == fake.OpState && !parked {
				return fake.Fault{Kind: fake.FaultTimeout} // dead BMC
			}
			return fake.Fault{}
		}})
	}
	if parked {
		powers["h1"].OutOfBandOff() // powered off for its owner (Online false)
	}
	c := fake.NewCluster()
	for _, m := range []string{"m1", "m2"} {
		if parked && m == "m1" {
			continue // h1 a spare its owner parked
		}
		c.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: m, Cluster: "c"})
		c.PutNode(remediation.Node{Name: m, UID: "n-" + m, Ready: m != "m2"})
	}
	c.SetNeedsRemediation("m2", true)
	a, err := c.GetAdmissions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Machines = []string{"m0"}
	a.Requests = map[string]remediation.Request{"m0": {Value: remediation.RebootValue("uid-m0", time.Time{}), Host: "h0"}}
	a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	rem := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: clk.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: clk.Now, HostsMayVanish: true,
			Power:  func(h string) (power.Controller, error) { return powers[h], nil },
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{Timeout: 3 * time.Minute, MinHealthyPeriod: 20 * time.Minute}}
	var lastErr error
	for i := 0; i < 360; i++ { // an hour of 10 s passes
		clk.Advance(10 * time.Second)
		for _, m := range []string{"m0", "m1", "m2"} {
			if _, err := rem.Reconcile(ctx, m); err != nil && m == "m0" {
				lastErr = err
			}
		}
		adm, _ := c.GetAdmissions(ctx)
		if !adm.Has("m0") && adm.Has("m2") {
			return
		}
	}
	adm, _ := c.GetAdmissions(ctx)
	off := []string{}
	for _, h := range []string{"h0", "h1", "h2"} {
		if !powers[h].HardwareOn() {
			off = append(off, h)
		}
	}
	rec2, _ := c.Get(ctx, "m2")
	t.Fatalf("after an hour: admissions %v (hosts off by ground truth: %v); m0's last pass: %v; m2: %s %q",
		adm.Machines, off, lastErr, rec2.State.Phase, rec2.State.Message)
}
