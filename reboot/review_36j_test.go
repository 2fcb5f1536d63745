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

// Review 36 round 10 (TestReview36j_SoftFailureMadeBeforeRebootInSameSecondCutsIt):
// doc.go promises that a soft reboot falls back to hard when its soft
// power-off fails, "a soft power-off of this reboot: one made before the
// reboot began does not count, even if its failure is answered late".
// softFailedSince (decide.go) compares the call's Sent (a late answer:
// the At of the first busy answer, an upper bound of when it was made) or
// At, at full clock resolution, with PendingRebootSince, which Decide
// stamps truncated to Config.Precision (decide.go: p := now.Truncate;
// PendingRebootSince = maxTime(p, ...)). A reboot that begins in the same
// second as an earlier call is stamped before that call, so the call's
// failure counts as the reboot's own. Here an Online=false enforcement's
// soft power-off is made at s+0.1 s (its BMC call hangs and fails at
// 100 s), Online is set back to true and a client asks a soft reboot at
// s+0.3 s, whose first pass at s+0.4 s stamps PendingRebootSince = s: when
// the enforcement's failure comes, the reboot, its own soft power-off never
// tried, is cut hard at once, 100 s after the request (SoftTimeout 180 s).
func TestReview36j_SoftFailureMadeBeforeRebootInSameSecondCutsIt(t *testing.T) {
	ctx := context.Background()
	w, pw, pc := review36HungSoftOff()
	clk, cfg, store := w.clk, w.cfg, w.store
	rec := w.newRec()
	pass := func() reboot.Result {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() {
			t.Logf("%v %v %v %s", clk.Now().Format("15:04:05.000"), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
		}
		return res
	}
	run := func(until time.Time) {
		for clk.Real().Before(until) {
			res := pass()
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 100 * time.Millisecond
			}
			clk.Advance(max(min(next, until.Sub(clk.Real())), time.Millisecond))
		}
	}
	setOnline := func(on bool) {
		require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = on }))
	}
	run(clk.Real().Add(5 * time.Minute))
	// s: a whole second on the controller's clock.
	clk.Advance(clk.Now().Truncate(time.Second).Add(time.Second + 100*time.Millisecond).Sub(clk.Now()))
	s := clk.Now().Truncate(time.Second)
	setOnline(false)
	pass() // s+0.1 s: the enforcement's soft power-off, in flight
	require.False(t, pc.landAt.IsZero(), "the setup: the enforcement's soft power-off is in flight")
	require.Equal(t, power.ModeSoft, pc.mode)
	clk.Advance(200 * time.Millisecond)
	setOnline(true)
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err := client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	req := clk.Real()
	clk.Advance(100 * time.Millisecond)
	res := pass() // s+0.4 s: the reboot begins
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.PendingRebootSince.Equal(s), "the setup: the reboot is stamped %v (s %v); %s", h.Status.PendingRebootSince, s, res.Decision.Reason)
	run(req.Add(3 * time.Minute))
	review36RequireFirstOffSoft(t, pw, req, cfg.SoftTimeout,
		"the soft reboot's first power-off reached the BMC hard, %v after the request (SoftTimeout %v), its own soft power-off never tried: the failure of the Online=false enforcement's soft power-off, made before the reboot began, counted as the reboot's own (PendingRebootSince truncated to the second, Sent/At not); power-offs %v")
}

// Review 36 round 10 (TestReview36j_NewTrackerDatesLateFailureFromItsStart):
// Tracker's doc says losing its memory ("a restart, a new Tracker,
// Forget") is always safe, and Late dates a late answer's call Sent =
// the first busy call reported since the previous late answer, "or the
// Tracker's start if none" (late.go: "the controller's start if it saw
// none: the call is older"). That fallback is an upper bound of when the
// call was made, and softFailedSince escalates a reboot that began no
// later than Sent: the wrong direction. A caller that starts a new
// Tracker for a host (as the doc allows) while a call made under the old
// one is still in flight (its LateAnswerer, e.g. kube.Async, outlives
// the Tracker) takes that call's late failure as made at the new
// Tracker's start. Here an Online=false enforcement's soft power-off is
// made at 0 (its BMC call hangs and fails at 100 s), Online is true
// again at 10 s, a client asks a soft reboot at 50 s, and the caller
// starts a new Tracker at 60 s: the enforcement's failure, answered at
// 100 s, cuts the reboot hard at once (its own soft power-off never
// reached the BMC). With the old Tracker kept it is not (Sent = 0).
func TestReview36j_NewTrackerDatesLateFailureFromItsStart(t *testing.T) {
	ctx := context.Background()
	w, pw, pc := review36HungSoftOff()
	clk, cfg, store := w.clk, w.cfg, w.store
	tr := reboot.NewTracker(clk.Monotonic(), clk.Now())
	pass := func() reboot.Decision {
		d, err := review36TrackerPass(ctx, tr, cfg, store, pc, clk)
		require.NoError(t, err)
		if testing.Verbose() {
			t.Logf("%v %v %v %s", clk.Now().Format("15:04:05.000"), d.Power, d.Mode, d.Reason)
		}
		return d
	}
	run := func(until time.Time) {
		for clk.Real().Before(until) {
			next := pass().RequeueAfter
			if next <= 0 {
				next = 100 * time.Millisecond
			}
			clk.Advance(max(min(next, until.Sub(clk.Real())), time.Millisecond))
		}
	}
	setOnline := func(on bool) {
		require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = on }))
	}
	run(clk.Real().Add(5 * time.Minute))
	t0 := clk.Real()
	setOnline(false)
	run(t0.Add(10 * time.Second))
	require.False(t, pc.landAt.IsZero(), "the setup: the enforcement's soft power-off is in flight")
	require.Equal(t, power.ModeSoft, pc.mode)
	setOnline(true)
	run(t0.Add(50 * time.Second))
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err := client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	req := clk.Real()
	run(t0.Add(60 * time.Second))
	tr = reboot.NewTracker(clk.Monotonic(), clk.Now()) // a new Tracker: "always safe"
	run(t0.Add(3 * time.Minute))
	review36RequireFirstOffSoft(t, pw, req, cfg.SoftTimeout,
		"the soft reboot's first power-off reached the BMC hard, %v after the request (SoftTimeout %v), its own soft power-off never tried: the new Tracker dated the late failure of the Online=false enforcement's soft power-off (made before the reboot began) at its own start; power-offs %v")
}

// forgetDuring is a slow BMC whose first power-off reaches the hardware
// only when its call returns, after lag; while it runs, another goroutine
// of the caller forgets the host (forget, at forgetAt into the call).
type forgetDuring struct {
	*fake.Power
	clk      *fake.Clock
	lag      time.Duration
	forgetAt time.Duration
	forget   func()
	done     bool
}

func (f *forgetDuring) Off(ctx context.Context, m power.Mode) error {
	if f.done {
		return f.Power.Off(ctx, m)
	}
	f.done = true
	f.clk.Advance(f.forgetAt)
	f.forget()
	f.clk.Advance(f.lag - f.forgetAt)
	return f.Power.Off(ctx, m)
}

func (f *forgetDuring) TogglesOff(power.Mode) bool { return true }

// Review 36 round 10 (TestReview36j_ForgetDuringPressCountsItFromForget):
// Reconciler.Forget replaces the host's memory (reconciler.go Forget:
// r.hosts[name] = ....forgotten(m)), but a pass already running keeps
// the old one (Reconcile's hm) and notes its press's return there
// (sentOff, answered), where nobody reads it again. Forget takes r.mu
// and is documented as a restart would be, not as a call only its own
// Loop may make between passes; a press still running when another
// goroutine forgets the host then counts, for the new memory, from the
// Forget (lastPress = m), not from when it returned (the latest it may
// have reached the hardware: TestReview36h_PressCountsFromCallStartNotItsLanding).
// Here a soft reboot's press (a BMC whose soft power-off is the power
// button) takes 100 s and reaches the hardware when it returns, the host
// is forgotten 15 s into it, the OS takes 120 s to shut down (off at
// 220 s), reads are 29 s old: the controller presses again at 225 s
// (Forget + SoftTimeout + StaleReads) on an echo of the running OS, and
// powers the held host on.
func TestReview36j_ForgetDuringPressCountsItFromForget(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 120 * time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	pc := &forgetDuring{Power: pw, clk: clk, lag: 100 * time.Second, forgetAt: 15 * time.Second}
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pc, nil }}
	pc.forget = func() { rec.Forget("h") }
	pc.done = true
	run := func(until time.Time) {
		for clk.Real().Before(until) {
			res, err := rec.Reconcile(ctx, "h")
			require.NoError(t, err)
			if testing.Verbose() {
				t.Logf("%v %v %v %s", clk.Now().Format("15:04:05.000"), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
			}
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 100 * time.Millisecond
			}
			clk.Advance(max(min(next, until.Sub(clk.Real())), time.Millisecond))
		}
	}
	run(clk.Real().Add(5 * time.Minute))
	pc.done = false
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err := client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	run(start.Add(8 * time.Minute))
	require.True(t, pc.done, "the setup: the press was sent")
	require.False(t, pw.WasOnAt(start.Add(221*time.Second)),
		"the setup: the press landed at 100 s and the host went off; truth %s", rebootcheck.DescribeTruth(pw))
	if on := poweredOnByCommand(pw, start); !on.IsZero() {
		t.Fatalf("a press still running when the host was forgotten counted from the Forget: the controller pressed the button of the held host (keyed annotation present) on an echo and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}
