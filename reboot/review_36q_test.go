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

// Review 36 round 17 (TestReview36q_RestartPendingHardFenceWaitsLostLanding):
// on a BMC whose soft power-off may press the button but whose hard one
// sets the power (fake.ButtonSoft: iLO-like Redfish, and every IPMI host:
// power/ipmi TogglesOff(soft) is true), a client asks for a hard fence.
// The controller persists the pending reboot and dies before its ForceOff
// (a crash between the versioned write and the call). Nothing was ever
// pressed: Status.LastPress is zero, and
// every press is recorded there before it is sent (doc.go, A5). Yet the
// restarted controller counts the pending reboot as a press that may land
// (reconciler.go:448-449, sinceOff's first pass: noPress needs no pending
// reboot; a standby or a new leader counts a press only for a LastPress,
// reconciler.go:476,482), and landWait
// (toggle.go:123), new in round 16, now holds back EVERY power-off, the
// ForceOff included, for LostLanding (180 s): the host keeps running and
// the fence is answered about 3 minutes late instead of within
// Lag + StaleReads + 1 s (doc.go: "each request is answered within ...").
// Before landWait the ForceOff went out at once (pressWait only guards
// power-offs that toggle). Fix (suggested): count an unseen press at a
// restart only if Status.LastPress is set (it is written before every
// press), or let landWait hold back only while a press is known to be
// lost (this controller's own, or a LastPress it read), not for a pending
// reboot whose status shows no press.
func TestReview36q_RestartPendingHardFenceWaitsLostLanding(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	probe := &rebootcheck.Probe{Controller: pw}
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return probe, nil }}
	}
	rec := newRec()
	clk.Advance(time.Minute)
	for i := 0; i < 5; i++ { // settle: host on, idle
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.True(t, pw.HardwareOn())
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	requestAt := clk.Real()
	// The first pass persists the pending reboot and the process dies
	// before its ForceOff.
	probe.CrashArmed = true
	_, _ = rec.Reconcile(ctx, "h")
	require.True(t, probe.Crashed, "the setup: the process died between its write and its power call")
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Pending(), "the setup: the pending reboot was persisted")
	require.True(t, h.Status.LastPress.IsZero(), "the setup: no press was ever decided")
	clk.Advance(time.Second)
	rec = newRec() // the restart
	var fencedAt time.Time
	for end := requestAt.Add(6 * time.Minute); clk.Real().Before(end) && fencedAt.IsZero(); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone || testing.Verbose() && res.Decision.Reason != "" {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(requestAt), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if f, err := client.Fenced(ctx, tk); err == nil && f {
			fencedAt = clk.Real()
			break
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		clk.Advance(min(max(next, time.Millisecond), time.Second))
	}
	for _, c := range pw.Calls() {
		require.False(t, c.Op == fake.OpOff && c.Mode == power.ModeSoft, "the setup: nothing was ever pressed; calls %+v", pw.Calls())
	}
	require.False(t, fencedAt.IsZero(), "never fenced; truth %s", rebootcheck.DescribeTruth(pw))
	// Lag (0) + StaleReads (30 s) + 1 s after the request, plus the
	// restart's second and a few seconds of slack.
	bound := cfg.StaleReads + 5*time.Second
	require.LessOrEqual(t, fencedAt.Sub(requestAt), bound,
		"a hard fence pending across a restart, with no press ever decided (LastPress zero), was answered %v after the request (the ForceOff held back by landWait for LostLanding); truth %s",
		fencedAt.Sub(requestAt), rebootcheck.DescribeTruth(pw))
}

// Review 36 round 17 (TestReview36q_RestartHeldHostPoweredOnRunsLostLanding):
// the same root cause on a held host. A hard fence on a ButtonSoft BMC
// (every IPMI host) is answered and held, nothing was ever pressed
// (Status.LastPress zero). The controller restarts; then the host is
// powered on out of band (a technician, a BMC power-restore policy after
// a PDU event). doc.go A2: "the controller powers a held host off again
// as soon as a read shows it on (within PollInterval plus the read's
// staleness ...)". The restarted controller counts the pending reboot as
// a press it did not see answered (reconciler.go:448-449: noPress needs
// no pending reboot) and landWait (toggle.go:123) holds back the ForceOff
// until LostLanding after the restart: the fenced host runs for minutes
// while a client's keyed annotation holds it, although no press was ever
// decided and a ForceOff presses nothing.
func TestReview36q_RestartHeldHostPoweredOnRunsLostLanding(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return pw, nil }}
	}
	rec := newRec()
	clk.Advance(time.Minute)
	step := func() reboot.Result {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		clk.Advance(min(max(next, time.Millisecond), time.Second))
		return res
	}
	for i := 0; i < 5; i++ {
		step()
	}
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for end := clk.Real().Add(2 * time.Minute); clk.Real().Before(end); {
		step()
		if f, err := client.Fenced(ctx, tk); err == nil && f {
			break
		}
	}
	f, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, f, "the setup: fenced")
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.LastPress.IsZero(), "the setup: no press was ever decided")
	// Held; the controller restarts, and soon after the host is powered
	// on out of band.
	rec = newRec()
	step()
	clk.Advance(time.Second)
	pw.OutOfBandOn()
	onAt := clk.Real()
	for end := onAt.Add(5 * time.Minute); clk.Real().Before(end) && pw.HardwareOn(); {
		res := step()
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s", clk.Real().Sub(onAt), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
		}
	}
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h))
	var offAt time.Time
	for _, tc := range pw.Truth() {
		if tc.At.After(onAt) && !tc.On {
			offAt = tc.At
			break
		}
	}
	require.False(t, offAt.IsZero(), "never powered off again; truth %s", rebootcheck.DescribeTruth(pw))
	// PollInterval plus the read's staleness, and a few seconds.
	bound := reboot.DefaultConfig().PollInterval + cfg.StaleReads + 5*time.Second
	require.LessOrEqual(t, offAt.Sub(onAt), bound,
		"the held host, powered on out of band after a restart, ran %v before its ForceOff (no press ever decided; landWait held it back); truth %s",
		offAt.Sub(onAt), rebootcheck.DescribeTruth(pw))
}
