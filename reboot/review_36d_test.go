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

// latePress is leader A's controller: its power-off reaches the BMC some
// time after the pass wrote Status.LastPress (the call waits for the BMC's
// lock, a login, a slow GET and POST; in the binary it runs on in
// kube.Async's background, bounded only by the guard's lease). Meanwhile
// (before) runs: the standby's pass.
type latePress struct {
	*fake.Power
	before func()
}

func (l latePress) Off(ctx context.Context, m power.Mode) error {
	if l.before != nil {
		l.before()
	}
	return l.Power.Off(ctx, m)
}

// Review 36 round 4: a LastPress another leader wrote is counted by a
// standby "as sent at the pass that first read it, never earlier" (doc.go;
// memory.sinceOff). But a press is written before it is sent, and it
// reaches the BMC when the old leader's call lands, up to its lease's end:
// after the standby's read. The standby, once leader, presses again
// SoftTimeout + StaleReads after its read, which is less than that after
// the press: the OS (shutting down within SoftTimeout of the press, A2)
// went off less than StaleReads before, the On reading is an echo, and the
// press powers the held host on.
func TestReview36_StandbyCountsOtherLeadersPressFromItsWrite(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pw, nil }, Guard: &leaseGuard{l: lease, id: "b"}}
	var start time.Time
	lp := latePress{Power: pw}
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return lp, nil }, Guard: &leaseGuard{l: lease, id: "a"}}
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // standby: reads only
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start = clk.Real()
	// A writes LastPress and sends the press; the standby reads the
	// record 1 s later; the press reaches the BMC 10 s after the write,
	// within A's lease (15 s).
	lp.before = func() {
		clk.Advance(time.Second)
		_, _ = rb.Reconcile(ctx, "h")
		clk.Advance(9 * time.Second)
	}
	_, err = ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (LastPress persisted)")
	// A's lease ends 15 s after the request; B takes over.
	clk.Advance(start.Add(15 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	for end := start.Add(6 * time.Minute); clk.Real().Before(end); {
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

// lateOn is leader A's controller whose power-on reaches the BMC some time
// after the pass wrote Status.LastPoweredOn (see latePress).
type lateOn struct {
	*fake.Power
	before func()
}

func (l lateOn) On(ctx context.Context) error {
	if l.before != nil {
		l.before()
	}
	return l.Power.On(ctx)
}

// Review 36 round 4, the round-3 fix "a LastPoweredOn the controller
// neither wrote nor knew restarts QuietFor from the pass that first read
// it": a power-on is written before it is sent, and the old leader's On
// lands after the standby's read. On a BMC whose only reset type is
// PushPowerButton (ButtonAll: On is a press), the new leader's QuietFor
// reaches StaleReads while an Off reading may still echo the state from
// before that power-on: it powers on a host that is on, i.e. presses the
// button of a running host, which shuts down with no request.
func TestReview36_StandbyCountsOtherLeadersPowerOnFromItsWrite(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 10 * time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pw, nil }, Guard: &leaseGuard{l: lease, id: "b"}}
	lo := &lateOn{Power: pw}
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return lo, nil }, Guard: &leaseGuard{l: lease, id: "a"}}
	run := func(r *reboot.Reconciler, until time.Time, stop func() bool) {
		for clk.Real().Before(until) && (stop == nil || !stop()) {
			res, _ := r.Reconcile(ctx, "h")
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 10 * time.Millisecond
			}
			clk.Advance(next)
		}
	}
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // standby: reads only
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	run(ra, clk.Real().Add(5*time.Minute), func() bool { f, _ := client.Fenced(ctx, tk); return f })
	f, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, f)
	run(ra, clk.Real().Add(time.Minute), nil) // held off
	_, _ = rb.Reconcile(ctx, "h")             // standby reads the held host
	require.NoError(t, client.Release(ctx, tk))
	var onAt time.Time
	lo.before = func() {
		clk.Advance(time.Second)
		_, _ = rb.Reconcile(ctx, "h") // standby reads LastPoweredOn
		clk.Advance(9 * time.Second)
		onAt = clk.Real()
		lo.before = nil
	}
	start := clk.Real()
	run(ra, start.Add(time.Minute), func() bool { return !onAt.IsZero() })
	require.False(t, onAt.IsZero(), "A powered the released host on")
	require.True(t, pw.HardwareOn())
	// A's lease ends 15 s after its power-on pass; B takes over.
	clk.Advance(start.Add(15 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	run(rb, start.Add(5*time.Minute), nil)
	for _, tc := range pw.Truth() {
		if !tc.On && tc.At.After(onAt) {
			t.Fatalf("the running host (Online, no request) was powered off %v after the old leader's power-on landed: the new leader pressed its button on an Off echo; truth %s",
				tc.At.Sub(onAt), rebootcheck.DescribeTruth(pw))
		}
	}
}
