package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Review 36 round 2: A4 and the package doc run one Runner per process
// and fence the Reconcilers by a Guard that is asked "never for reads":
// a standby process runs passes too. Its Reconciler decides in its first
// pass of a host, from the status read then, that no power-off and no
// press of a previous process can be in effect (memory.sinceOff: noOff,
// noPress), and never revisits that. Standby B reads the idle host; leader
// A then presses the power button for a keyed soft request (LastPress is
// persisted) and loses its lease while the OS shuts down; B takes over
// with SinceOff = SincePress = "never": its first On reading, a 20 s
// stale echo from before the shutdown ended, gets a press that powers the
// held host on.
func TestReview36_StandbyMemoryIgnoresOtherLeadersPress(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	pc := func(string) (power.Controller, error) { return pw, nil }
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "a"}}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "b"}}
	// Both processes run their loops; the host is idle and on.
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // standby: reads only
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	// Leader A presses the button and runs for 30 s, then is paused
	// (its lease runs out); the OS is still shutting down.
	for clk.Real().Before(start.Add(30 * time.Second)) {
		res, err := ra.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (persisted in LastPress)")
	// A's lease ends; B takes over 50 s after the request (the host went
	// off at 46 s; reads show the state of 20 s ago).
	clk.Advance(start.Add(50 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	for end := start.Add(5 * time.Minute); clk.Real().Before(end); {
		res, err := rb.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	if on := poweredOnByCommand(pw, start); !on.IsZero() {
		t.Fatalf("the new leader pressed the button of the held host (keyed annotation present) and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}

// Review 36 round 2: A2 says the controller powers a held host off again
// as soon as a read shows it on, and soft "falls back to hard after
// Config.SoftTimeout". A held host whose reboot was soft (the OS shut down
// in time, so Status.Mode stays soft) is powered on out of band and sits
// where the power button does nothing (firmware setup, a boot loader, an
// OS that ignores ACPI): heldOff sends a soft power-off every ReissueAfter
// for ever and never falls back to hard. The host runs, held by a keyed
// annotation, for as long as the test lasts (15 minutes), on a BMC that
// sets the power as on one whose soft power-off is a press.
func TestReview36_HoldBreakSoftNeverFallsBackToHard(t *testing.T) {
	for _, button := range []fake.ButtonKind{fake.ButtonNone, fake.ButtonSoft} {
		t.Run(button.String(), func(t *testing.T) {
			pc := fake.PowerConfig{Button: button, SoftDelay: 10 * time.Second, Lag: time.Second}
			w := newWorld(t, pc, reboot.Host{Online: true})
			c := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			tk, err := c.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			require.True(t, w.follow(t, 3*time.Minute, func() bool { f, _ := c.Fenced(w.ctx, tk); return f }), "fenced")
			w.follow(t, 5*time.Minute, func() bool { return false })
			require.False(t, w.pw.HardwareOn(), "held off")
			// Powered on out of band; it stops in the firmware, where the
			// power button is ignored.
			pc.IgnoreSoft = true
			w.pw.SetConfig(pc)
			w.pw.OutOfBandOn()
			at := w.clk.Real()
			w.follow(t, 15*time.Minute, func() bool { return false })
			bound := reboot.DefaultConfig().SoftTimeout + reboot.DefaultConfig().PollInterval + reboot.DefaultConfig().StaleReads
			if !w.pw.WasOffDuring(at.Add(time.Second), at.Add(bound)) {
				t.Fatalf("the held host (keyed annotation present) powered on out of band was not powered off within %v (SoftTimeout + PollInterval + StaleReads); still on after 15 min: %v; %d power calls; truth %s",
					bound, w.pw.HardwareOn(), len(w.pw.Calls()), rebootcheck.DescribeTruth(w.pw))
			}
		})
	}
}

// earlyOffEcho is a BMC within assumption A1 with OffSettle = 10 s and
// StaleReads = 30 s around the first soft press: the OS shuts down in
// 45 s (the hardware is off 46 s after the press); from 36 s the BMC says
// Off early (at most OffSettle before the hardware is off), and from 46 s
// to 75 s it answers On, the state of an instant at most 30 s old (the
// hardware ran until 46 s): flapping between an early Off and a stale On,
// as a shutting-down host does on some BMCs. Otherwise it reads honestly.
type earlyOffEcho struct {
	*fake.Power
	clk   *fake.Clock
	press time.Time
}

func (e *earlyOffEcho) State(ctx context.Context) (power.State, error) {
	if !e.press.IsZero() {
		switch d := e.clk.Real().Sub(e.press); {
		case d >= 36*time.Second && d < 46*time.Second:
			return power.StateOff, nil
		case d >= 46*time.Second && d < 75*time.Second:
			return power.StateOn, nil
		}
	}
	return e.Power.State(ctx)
}

func (e *earlyOffEcho) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft && e.press.IsZero() {
		e.press = e.clk.Real()
	}
	return e.Power.Off(ctx, m)
}

// Review 36 round 2: the press rule takes "an Off reading taken StaleReads
// after the press returned" as proof that the press's shutdown is over
// (offState.sawState, PressOver), but with Config.OffSettle an Off reading
// proves nothing until the run of Off readings is OffSettle long (A1: a
// BMC may say Off up to OffSettle before the hardware is off); the
// evidence rule requires that run, the press rule does not. An early Off
// 36 s after the press marks the shutdown over; StaleReads after it, an
// On reading (an A1-true echo of the hardware before it went off at 46 s)
// gets a second press, which powers the held host on.
func TestReview36_EarlyOffEndsPressWindow(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second})
	bmc := &earlyOffEcho{Power: pw, clk: clk}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Config: reboot.Config{OffSettle: 10 * time.Second},
		Power:  func(string) (power.Controller, error) { return bmc, nil }}
	_, err := r.Reconcile(ctx, "h")
	require.NoError(t, err)
	clk.Advance(5 * time.Minute)
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	for end := start.Add(5 * time.Minute); clk.Real().Before(end); {
		res, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	require.False(t, bmc.press.IsZero(), "pressed")
	require.True(t, pw.OffThroughout(bmc.press.Add(47*time.Second), bmc.press.Add(75*time.Second)) || !poweredOnByCommand(pw, start).IsZero(),
		"the hardware went off 46 s after the press (the scripted readings are A1-true)")
	if on := poweredOnByCommand(pw, start); !on.IsZero() {
		t.Fatalf("a second press powered the held host (keyed annotation present) on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}

// Review 36 round 2, issue point 3 ("a call that was not carried out
// (refused credentials, back-off, busy) is not tried: retry soft after
// RetryDelay") for the Pool's own "certainly changed nothing" answer:
// power.ErrNotSent (no session: a login that failed or was still running
// when the call's deadline came, or no free session slot on a BMC shared
// by several hosts). notCarriedOut (outcome.go) knows ErrAuth, ErrBackoff
// and ErrNotLeader but not ErrNotSent, so a soft press the Pool never sent
// counts as a press in effect: pressWait holds every soft retry for
// SoftTimeout + StaleReads and SoftTimeout cuts the power hard, although
// the OS would have shut down in 20 s.
func TestReview36_NotSentPressIsNeverRetriedSoft(t *testing.T) {
	notSent := &power.Error{Op: "off soft", Class: power.ClassBusy, Message: "login still running", Err: power.ErrNotSent}
	require.Equal(t, power.ClassBusy, reboot.CallClass(notSent))
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second}, reboot.Host{Online: true})
	ref := refusingToggler{&refusing{Controller: w.pw, now: w.clk.Real, until: w.clk.Real().Add(15 * time.Second), err: notSent}, w.pw}
	w.r.Power = func(string) (power.Controller, error) { return ref, nil }
	client := &reboot.Client{Hosts: w.store, Key: "drain", Now: w.clk.Now}
	_, err := client.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	w.follow(t, 4*time.Minute, func() bool { return false })
	var soft []time.Duration
	for _, c := range w.pw.Calls() {
		if c.Op == fake.OpOff && c.Mode == power.ModeHard {
			t.Fatalf("hard power-off %v after the request; the soft power-off the Pool never sent was not tried again (soft calls reaching the BMC: %v)", c.At.Sub(start), soft)
		}
		if c.Op == fake.OpOff {
			soft = append(soft, c.At.Sub(start))
		}
	}
	require.NotEmpty(t, soft, "soft power-off tried again once the Pool had a session")
	require.LessOrEqual(t, soft[0], 15*time.Second+reboot.DefaultConfig().RetryDelay, "tried again after RetryDelay")
}
