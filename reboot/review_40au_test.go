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

// slowOn40au is a BMC whose power-on call takes onTakes (on the fake
// clock) before the fake carries it out: a slow BMC, a call that runs to
// its deadline.
type slowOn40au struct {
	pw      *fake.Power
	clk     *fake.Clock
	onTakes time.Duration
}

func (s *slowOn40au) State(ctx context.Context) (power.State, error) { return s.pw.State(ctx) }
func (s *slowOn40au) Off(ctx context.Context, m power.Mode) error    { return s.pw.Off(ctx, m) }
func (s *slowOn40au) On(ctx context.Context) error {
	s.clk.Advance(s.onTakes)
	return s.pw.On(ctx)
}

// landed40au reports whether the hardware went on after since (ground
// truth).
func landed40au(pw *fake.Power, since time.Time) bool {
	for _, tc := range pw.Truth() {
		if tc.On && tc.At.After(since) {
			return true
		}
	}
	return false
}

// TestReview40au_SlowLostPowerOnBeforeRestartLandsAfterForget: bc5ac37
// keeps an Online=false host known off busy while a power-on of ours may
// still land: in memory LostLanding after the call's return
// (lostCalls.on), and from the record (which survives a restart) only
// until Status.LastPoweredOn + LostLanding (busy.go statusBusy). But
// LastPoweredOn is written before the call is sent: A5 (Config.LostLanding
// doc, doc.go) lets a call whose answer was lost land up to LostLanding
// after its *return*, and a value a controller did not write counts as
// sent at the pass that first reads it, LostLanding later still. A
// power-on that took 60 s and timed out (the BMC carries it out 170 s
// after it returned: within A5) is followed by Online=false and a
// restart a second later: the restarted controller records the host,
// read Off, known off and forgets it at LastPoweredOn + LostLanding
// (180 s), 50 s before the power-on lands; the host then runs under
// Online=false for ever with nobody watching. Ground truth: fake.Power on.
func TestReview40au_SlowLostPowerOnBeforeRestartLandsAfterForget(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	slow := &slowOn40au{pw: pw, clk: clk, onTakes: 60 * time.Second}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return slow, nil }}
	start := clk.Real()
	// The power-on runs 60 s, its answer is lost; the BMC carries it out
	// 170 s after the call returned (LostLanding = 180 s).
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 170 * time.Second})
	for i := 0; ; i++ {
		require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
		res, err := rec.Reconcile(ctx, "h")
		t.Logf("%v %v %q perr=%v err=%v", clk.Real().Sub(start), res.Decision.Power, res.Decision.Reason, res.PowerErr, err)
		if res.Decision.Power == reboot.ActionPowerOn {
			break
		}
		clk.Advance(time.Second)
	}
	returned := clk.Real()
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	t.Logf("power-on returned at %v; status %+v", returned.Sub(start), h.Status)
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))

	// Restart: a new process, memory gone; the host is dropped from the
	// inventory meanwhile (the HostLister lists what the record shows
	// busy).
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return slow, nil }}
	l := rec2.Loop(func(context.Context) ([]string, error) { return nil, nil })
	keys, err := l.Keys(ctx)
	require.NoError(t, err)
	require.Contains(t, keys, "h", "setup: the restarted controller lists the host (status %+v)", h.Status)
	restarted := clk.Real()
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	// The setup check reads the truth's history, not its end: a
	// controller that holds the host powers it off again once the
	// power-on lands (fixer s40b: HardwareOn at the end asserted that
	// nobody did).
	require.True(t, landed40au(pw, restarted), "setup: the lost power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	if !held && pw.HardwareOn() && !h.Online {
		t.Fatalf("an Online=false host whose slow power-on (60 s call, answer lost, carried out 170 s after its return: within A5) landed after a restart runs under Online=false and its key was forgotten: nobody powers it off (last Next %+v; status %+v; truth %s)",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, pw.HardwareOn(), "an Online=false host whose lost power-on landed after a restart is still on 10 min later, healthy BMC (held %v; last Next %+v; status %+v; truth %s)", held, last, h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview40au_WallClockSteppedForwardAtRestartForgetsBeforeLostPowerOnLands:
// the same window (statusBusy: now.Before(LastPoweredOn + LostLanding))
// is read on the wall clock (Reconciler.Now), compared with a wall time
// written by another process; only the in-memory lostCalls.on counts on
// the monotonic clock, and a restart loses it. A power-on whose answer is
// lost (the BMC carries it out 170 s later, within A5); Online=false a
// second later; the controller restarts on a machine whose wall clock is
// 2 min ahead (a clock stepped by NTP, a standby on another node): it
// records the host, read Off, known off and forgets it about a minute
// after the call, 110 s before the power-on lands. Ground truth:
// fake.Power on under Online=false, the key forgotten.
func TestReview40au_WallClockSteppedForwardAtRestartForgetsBeforeLostPowerOnLands(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 170 * time.Second})
	for i := 0; ; i++ {
		require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
		res, _ := rec.Reconcile(ctx, "h")
		if res.Decision.Power == reboot.ActionPowerOn {
			break
		}
		clk.Advance(time.Second)
	}
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))

	step := 2 * time.Minute
	rec2 := &reboot.Reconciler{Hosts: store, Now: func() time.Time { return clk.Now().Add(step) }, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	restarted := clk.Real()
	held, last := runLoop40as(t, rec2.Loop(func(context.Context) ([]string, error) { return nil, nil }), clk, 10*time.Minute)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, landed40au(pw, restarted), "setup: the lost power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	if !held && pw.HardwareOn() && !h.Online {
		t.Fatalf("an Online=false host whose lost power-on landed within A5 after a restart on a wall clock 2 min ahead runs under Online=false and its key was forgotten (last Next %+v; status %+v; truth %s)",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, pw.HardwareOn(), "an Online=false host whose lost power-on landed after a restart is still on 10 min later, healthy BMC (held %v; last Next %+v; status %+v; truth %s)", held, last, h.Status, rebootcheck.DescribeTruth(pw))
}
