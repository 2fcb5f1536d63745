package reboot_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// appliedTimeoutStore is a HostStore whose next Update, once armed, is
// applied and then reported as failed (an API write whose answer timed
// out after the server applied it: the caller cannot tell).
type appliedTimeoutStore struct {
	*fake.RebootHosts
	mu    sync.Mutex
	armed bool
}

func (s *appliedTimeoutStore) arm() { s.mu.Lock(); s.armed = true; s.mu.Unlock() }

func (s *appliedTimeoutStore) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	w, err := s.RebootHosts.Update(ctx, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.armed {
		s.armed = false
		return reboot.Host{}, context.DeadlineExceeded
	}
	return w, err
}

// Review 36 round 3: the round-2 fix counts a LastPress (or a pending
// reboot) that this controller "neither wrote nor knew" as another
// leader's press sent at the pass that first saw it (ownValues.foreign).
// But "wrote" means "saw its write succeed": a write that the store
// applied while its answer timed out is not noted. The pass that decided
// the first soft press of a reboot writes PendingRebootSince and
// LastPress, the write times out (applied), so no press is sent; the next
// pass reads its own LastPress, takes it for a foreign press sent now,
// and waits SoftTimeout + StaleReads before any press. At SoftTimeout the
// soft reboot falls back to hard: on a BMC whose soft power-off is the
// power button (iLO-like), a soft reboot is a hard power cut, the OS
// never asked to shut down (the very harm of issue 36 point 3, now from
// one timed-out write). Expected: the soft power-off goes out within
// RetryDelay (plus a pass) of the failed write, and no hard power-off is
// sent while the soft shutdown may still run.
func TestReview36_AppliedWriteTimeoutTurnsSoftIntoHard(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second})
	store := &appliedTimeoutStore{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	// The controller has known the host, idle and on, for a while.
	_, err := r.Reconcile(ctx, "h")
	require.NoError(t, err)
	clk.Advance(time.Minute)

	c := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = c.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	store.arm() // the first status write of the reboot times out, applied
	for end := start.Add(4 * time.Minute); clk.Real().Before(end); {
		res, err := r.Reconcile(ctx, "h")
		next := res.RequeueAfter
		if err != nil || res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	var firstSoft, firstHard time.Time
	for _, call := range pw.Calls() {
		if call.Op != fake.OpOff {
			continue
		}
		if call.Mode == power.ModeSoft && firstSoft.IsZero() {
			firstSoft = call.At
		}
		if call.Mode == power.ModeHard && firstHard.IsZero() {
			firstHard = call.At
		}
	}
	cfg := reboot.DefaultConfig()
	if firstSoft.IsZero() || firstSoft.Sub(start) > cfg.RetryDelay+cfg.QuickPoll+time.Second {
		t.Errorf("soft reboot: the first soft power-off went out at %v after the request (zero: never), want within RetryDelay of the failed write",
			sub(firstSoft, start))
	}
	if !firstHard.IsZero() {
		t.Errorf("soft reboot cut hard %v after the request; first soft power-off at %v; truth %s",
			firstHard.Sub(start), sub(firstSoft, start), rebootcheck.DescribeTruth(pw))
	}
}

func sub(a, b time.Time) time.Duration {
	if a.IsZero() {
		return 0
	}
	return a.Sub(b)
}

// Review 36 round 3: A4's standby sentence covers a press or power-off
// the old leader recorded, not its power-on. Status.LastPoweredOn is
// written by a versioned write before every power-on, exactly as
// LastPress before a press, yet a value of it that this controller
// neither wrote nor knew does not restart QuietFor: the standby that
// takes over counts the old leader's power-on as "never" (QuietFor since
// its own start). On a BMC whose only reset type is PushPowerButton (On
// is a press, as step "an unknown reading never powers on" warns), leader
// A powers an Online host on and loses its lease; B takes over 5 s later,
// reads Off (a 20 s stale echo from before A's power-on, within A1), and
// presses the button again: the host A just powered on is powered off,
// while Online is true and no reboot is requested. Expected: B waits
// StaleReads after the first pass that read A's LastPoweredOn, as A would
// have after its own power-on, and the host stays on.
func TestReview36_StandbyIgnoresOtherLeadersPowerOn(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}})
	pw.OutOfBandOff()
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	pc := func(string) (power.Controller, error) { return pw, nil }
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "a"}}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "b"}}
	clk.Advance(time.Minute)
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // standby: reads only
	clk.Advance(5 * time.Minute)
	require.False(t, pw.HardwareOn())

	// The operator sets Online; leader A powers the host on.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	start := clk.Real()
	res, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	require.Equal(t, reboot.ActionPowerOn, res.Decision.Power, res.Decision.Reason)
	clk.Advance(2 * time.Second)
	require.True(t, pw.HardwareOn(), "A powered the host on")
	// A's lease ends (it is paused); B takes over 5 s after A's power-on.
	clk.Advance(3 * time.Second)
	lease.give("b", time.Hour)
	for end := start.Add(3 * time.Minute); clk.Real().Before(end); {
		res, err := rb.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	if pw.WasOffDuring(start.Add(2*time.Second), clk.Real()) {
		t.Fatalf("the new leader pressed the button of the host the old leader had just powered on (Online true, no request) and powered it off; truth %s",
			rebootcheck.DescribeTruth(pw))
	}
}

// noHardOff is a BMC that offers no hard power-off (a Redfish system
// whose allowable reset types are On and GracefulShutdown only: the
// adapter answers ClassUnsupported for hard); soft works.
type noHardOff struct{ *fake.Power }

func (n noHardOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		return &power.Error{Op: power.OpName(m), Class: power.ClassUnsupported, Message: "none of [ForceOff PushPowerButton] among the allowable reset types"}
	}
	return n.Power.Off(ctx, m)
}

// Review 36 round 3: the round-2 fix powers a broken hold off "hard
// whatever the reboot's mode", with no way back to soft: heldOff sends a
// hard power-off, the BMC answers unsupported, wait() never waits on
// ClassUnsupported, and the next pass sends hard again, for ever. A held
// host (keyed annotation present) powered on out of band on a BMC that
// offers only a graceful power-off is never powered off again, though A2
// promises it within PollInterval plus the read's staleness, and soft
// (the reboot's own mode, which did it before the fix) would work.
func TestReview36_HoldBreakHardUnsupportedNeverPowersOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second, Lag: time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return noHardOff{pw}, nil }}
	run := func(limit time.Duration) {
		for end := clk.Real().Add(limit); clk.Real().Before(end); {
			res, err := r.Reconcile(ctx, "h")
			require.NoError(t, err)
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 10 * time.Millisecond
			}
			clk.Advance(next)
		}
	}
	run(time.Minute)
	c := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	tk, err := c.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	run(3 * time.Minute)
	f, err := c.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, f, "fenced by the soft power-off")
	require.False(t, pw.HardwareOn())
	pw.OutOfBandOn()
	at := clk.Real()
	run(10 * time.Minute)
	cfg := reboot.DefaultConfig()
	bound := cfg.SoftTimeout + cfg.PollInterval + cfg.StaleReads
	if !pw.WasOffDuring(at.Add(time.Second), at.Add(bound)) {
		t.Fatalf("held host powered on out of band on a BMC without a hard power-off: not powered off within %v (still on after 10 min: %v); truth %s",
			bound, pw.HardwareOn(), rebootcheck.DescribeTruth(pw))
	}
}
