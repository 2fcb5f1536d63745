package reboot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// inFlight is a power controller run as kube.Async runs one: a power call
// goes on in the background and its pass is answered busy at once; while
// it runs, every call of the host (State included) is answered busy; it
// reaches the BMC (the wrapped fake) landAfter after it began, and its
// answer is then kept for the next pass (reboot.LateAnswerer). fail, if
// set, is the BMC's answer instead of the fake's (the fake is then not
// called: a soft power-off the BMC refused).
type inFlight struct {
	*fake.Power
	clk       *fake.Clock
	landAfter time.Duration
	toggles   bool
	// oneCall: only the first power-off hangs; later calls are answered
	// at once (the BMC recovered).
	oneCall bool

	landAt time.Time // zero: nothing in flight
	landed bool
	mode   power.Mode
	fail   error
	answer *reboot.LateAnswer
}

var errInFlight = fmt.Errorf("BMC call still running: %w", power.ErrBusy)

func (a *inFlight) land(ctx context.Context) bool {
	if a.landAt.IsZero() {
		return true
	}
	if a.clk.Real().Before(a.landAt) {
		return false
	}
	a.landAt, a.landed = time.Time{}, true
	err := a.fail
	if err == nil {
		err = a.Power.Off(ctx, a.mode)
	}
	a.answer = &reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: a.mode, Err: err}
	return true
}

func (a *inFlight) State(ctx context.Context) (power.State, error) {
	if !a.land(ctx) {
		return power.StateUnknown, errInFlight
	}
	return a.Power.State(ctx)
}

func (a *inFlight) On(ctx context.Context) error {
	if !a.land(ctx) {
		return errInFlight
	}
	return a.Power.On(ctx)
}

func (a *inFlight) Off(ctx context.Context, m power.Mode) error {
	if !a.land(ctx) {
		return errInFlight
	}
	if a.oneCall && a.landed {
		return a.Power.Off(ctx, m)
	}
	a.landAt, a.mode = a.clk.Real().Add(a.landAfter), m
	return errInFlight
}

func (a *inFlight) LateAnswer() (reboot.LateAnswer, bool) {
	if a.answer == nil {
		return reboot.LateAnswer{}, false
	}
	la := *a.answer
	a.answer = nil
	return la, true
}

func (a *inFlight) TogglesOff(power.Mode) bool { return a.toggles }

// Review 36 round 9 (TestReview36i_TrackerForgetThenLatePressIsNoPress):
// Tracker.Late decides whether a late power-off was a
// press from t.o (the Observed of the last Observe: SoftToggles,
// HardToggles) or busyPress (memory) — tracker.go Late:
// `t.mem.late(a, now, mono, a.Action == ActionPowerOff && t.o.toggles(a.Mode))`.
// Forget resets both (`*t = Tracker{...}`: o zero, memory new), and Late
// must be called before the next Observe, so a press still in flight when
// the caller forgot the host (Reconciler.Loop forgets a host its store
// answers NotFound; the host is listed again) is recorded, when its answer
// comes, as a power-off that does not press: SincePress still counts from
// Forget, not from the answer. The Reconciler asks its Toggler instead
// (reconciler.go Reconcile: hm.late(..., t.TogglesOff(late.Mode))) and
// gets it right. Here the press is sent at 0, the caller forgets the host
// at 20 s (its store answers NotFound until 100 s), the press reaches the
// BMC at 100 s (its success is the late answer, taken by the first pass
// once the host is listed again), the OS takes 120 s to shut down (off at
// 220 s), reads are 29 s old: the Tracker's caller presses again at 230 s
// (Forget + SoftTimeout + StaleReads) on an echo of the running OS, and
// that press powers the held host on when it lands. The Reconciler, in
// the same world, waits until 310 s and never presses.
func TestReview36i_TrackerForgetThenLatePressIsNoPress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tracker bool
	}{{"Reconciler", false}, {"Tracker", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			cfg := reboot.DefaultConfig()
			pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 120 * time.Second,
				Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
			pc := &inFlight{Power: pw, clk: clk, landAfter: 100 * time.Second, toggles: true}
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
			rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(string) (power.Controller, error) { return pc, nil }}
			tr := reboot.NewTracker(clk.Monotonic(), clk.Now())
			pass := func() (reboot.Decision, error) {
				if !tc.tracker {
					res, err := rec.Reconcile(ctx, "h")
					if res.Requeue {
						res.Decision.RequeueAfter = 0
					}
					return res.Decision, err
				}
				return review36TrackerPass(ctx, tr, cfg, store, pc, clk)
			}
			_, err := pass()
			require.NoError(t, err)
			clk.Advance(5 * time.Minute)

			client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
			_, err = client.Request(ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			start := clk.Real()
			forgotten := false
			for end := start.Add(8 * time.Minute); clk.Real().Before(end); {
				if !forgotten && clk.Real().Sub(start) >= 20*time.Second {
					// The store answers NotFound from 20 s to 100 s (the
					// record deleted and re-created, a cache that lost it):
					// the caller forgets the host, as Reconciler.Loop does,
					// and leaves it alone until it is listed again, at
					// 100 s, once the press's answer came.
					forgotten = true
					if tc.tracker {
						tr.Forget(clk.Monotonic(), clk.Now())
					} else {
						rec.Forget("h")
					}
					clk.Advance(start.Add(100 * time.Second).Sub(clk.Real()))
				}
				d, err := pass()
				require.NoError(t, err)
				if testing.Verbose() {
					t.Logf("%v %v %v %s", clk.Real().Sub(start), d.Power, d.Mode, d.Reason)
				}
				next := d.RequeueAfter
				if next <= 0 {
					next = 100 * time.Millisecond
				}
				if !forgotten {
					next = min(next, start.Add(20*time.Second).Sub(clk.Real()))
				}
				clk.Advance(max(next, time.Millisecond))
			}
			require.False(t, pw.WasOnAt(start.Add(221*time.Second)),
				"the setup: the press landed at 100 s and the host went off; truth %s", rebootcheck.DescribeTruth(pw))
			if on := poweredOnByCommand(pw, start); !on.IsZero() {
				t.Fatalf("a press answered late after Forget counted from Forget: the controller pressed the button of the held host (keyed annotation present) on an echo and powered it on %v after the request; truth %s",
					on.Sub(start), rebootcheck.DescribeTruth(pw))
			}
		})
	}
}

// Review 36 round 9 (TestReview36i_LateSoftFailureOfEnforcementCutsNewReboot):
// b2ca350 made a failed soft power-off escalate a reboot to hard only if
// its Call.At is not before PendingRebootSince (decide.go softFailedSince),
// and doc.go promises "a soft power-off of this reboot: one that failed
// before the reboot began does not count". But a late answer
// (LateAnswerer, kube.Async) is recorded with At = the pass that took it
// (late.go memory.late: Call{..., At: now}), not when its call was made,
// so the failure of a soft power-off sent for an earlier Online=false
// enforcement (Online set back to true since), answered after a soft
// reboot was asked, is taken for this reboot's own and cuts the power
// hard at once. Here the enforcement's soft power-off is sent at 0 (its
// BMC call hangs), Online is true again at 10 s, a client asks a soft
// reboot at 50 s (its own soft power-off is refused at once: a call is in
// flight, so it never reaches the BMC), and the hung call fails at 100 s:
// the next pass sends ForceOff 50 s after the request, the reboot's soft
// power-off never tried, long before SoftTimeout (180 s).
func TestReview36i_LateSoftFailureOfEnforcementCutsNewReboot(t *testing.T) {
	ctx := context.Background()
	w, pw, pc := review36HungSoftOff()
	clk, cfg, store := w.clk, w.cfg, w.store
	rec := w.newRec()
	run := func(until time.Time) {
		for clk.Real().Before(until) {
			res, err := rec.Reconcile(ctx, "h")
			require.NoError(t, err)
			if testing.Verbose() {
				t.Logf("%v %v %v %s", clk.Real(), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
			}
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
	run(t0.Add(3 * time.Minute))
	review36RequireFirstOffSoft(t, pw, req, cfg.SoftTimeout,
		"the first power-off of the soft reboot reached the BMC hard, %v after the request (SoftTimeout %v), its own soft power-off never tried: the late failure of the Online=false enforcement's soft power-off was taken for this reboot's; calls %v")
}
