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

// TestReview40ak_TrackerActingSinceBeforeSuspendedPowerOffReturned: the
// Tracker converts its monotonic clock to the wall clock by the offset
// taken at its start (tracker.go Observe: o.ActingSince =
// hm.quietSince(t.act.start, t.act.wall); quiet.go quietSince:
// startWall.Add(h.off.lastOff - start)). A monotonic clock stops while
// the host is suspended (Go's time.Since: CLOCK_MONOTONIC; a paused VM),
// the wall clock does not: after a suspend during a power-off (a press),
// the Status.ActingSince the next pass writes, "the instant by which
// every power-off (a press included) decided for the host had returned"
// (quiet.go), is the suspend's length earlier than the wall-clock
// instant the call returned. A restarted controller (or the next leader)
// counts the press from that ActingSince (actedBound.bound): its
// SincePress is an hour although the press returned two seconds ago,
// while its OS shutdown may still be running. Ground truth: the wall
// clock at which the call returned.
func TestReview40ak_TrackerActingSinceBeforeSuspendedPowerOffReturned(t *testing.T) {
	cfg := reboot.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const suspend = time.Hour
	h := reboot.Host{Name: "h", Online: true, Version: "1", Annotations: map[string]string{reboot.Annotation: ""},
		Status: reboot.Status{Format: reboot.StatusFormat}}
	tr := reboot.NewTracker(0, t0)
	rd := func(wall time.Time, mono time.Duration, p power.State) reboot.Reading {
		return reboot.Reading{Host: h, Power: p, Now: wall, Mono: mono, ReadEnd: mono, SoftToggles: true, HardToggles: false}
	}
	var pressReturned, lastReturned time.Time
	mono, wall := 10*time.Second, t0.Add(10*time.Second)
	var written time.Time
	for pass := 0; pass < 40; pass++ {
		p := power.StateOn
		o := tr.Observe(rd(wall, mono, p), cfg)
		d := cfg.Decide(o, wall)
		t.Logf("pass %d at %v (mono %v): power %v mode %v update %v acting %v reason %s", pass, wall.Sub(t0), mono, d.Power, d.Mode, d.UpdateStatus,
			d.Status.ActingSince, d.Reason)
		if d.UpdateStatus {
			tr.Writing(d)
			h.Status = d.Status
			v := h.Version + "x"
			h.Version = v
			tr.Applied(d, v)
		} else {
			tr.Applied(d, "")
		}
		if d.Power != reboot.ActionNone {
			tr.Sending(d.Power, d.Mode, mono)
			if pressReturned.IsZero() && d.Power == reboot.ActionPowerOff {
				// The host is suspended during the call: the wall clock
				// goes on, the monotonic clock does not.
				wall = wall.Add(suspend)
			}
			mono += time.Second
			wall = wall.Add(time.Second)
			if pressReturned.IsZero() && d.Power == reboot.ActionPowerOff {
				pressReturned = wall
			}
			lastReturned = wall
			tr.Sent(reboot.Call{Action: d.Power, Mode: d.Mode, At: wall}, nil, mono)
		}
		if !pressReturned.IsZero() && !h.Status.ActingSince.IsZero() {
			written = h.Status.ActingSince
			break
		}
		mono += time.Second
		wall = wall.Add(time.Second)
	}
	if pressReturned.IsZero() || written.IsZero() {
		t.Fatalf("setup: no power-off sent (%v) or no ActingSince written (%v)", pressReturned, written)
	}
	if written.Add(cfg.Precision).Before(lastReturned) {
		t.Errorf("Status.ActingSince written %v, %v before the wall-clock instant the last power-off returned (%v): it says every power-off had returned an hour before they did",
			written.Sub(t0), lastReturned.Sub(written), lastReturned.Sub(t0))
	}
	// A restarted controller reads that status two seconds after the
	// press returned (its own clocks agree from its start).
	now := lastReturned.Add(2 * time.Second)
	tr2 := reboot.NewTracker(0, now)
	o := tr2.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: now, Mono: 0, SoftToggles: true}, cfg)
	d := cfg.Decide(o, now)
	t.Logf("restarted: power %v mode %v reason %s; SincePress %v SinceOff %v", d.Power, d.Mode, d.Reason, o.SincePress, o.SinceOff)
	for _, ps := range []power.State{power.StateOff, power.StateOn} {
		tr3 := reboot.NewTracker(0, now)
		o3 := tr3.Observe(reboot.Reading{Host: h, Power: ps, Now: now, Mono: 0, SoftToggles: true}, cfg)
		d3 := cfg.Decide(o3, now)
		t.Logf("restarted reading %v: power %v mode %v reason %s", ps, d3.Power, d3.Mode, d3.Reason)
	}
	if o.SincePress > 2*time.Second || o.SinceOff > 2*time.Second {
		t.Errorf("a restarted controller counts the power-offs (a press among them) the last of which returned 2 s ago as returned %v ago (SincePress), power-off %v ago (SinceOff)",
			o.SincePress, o.SinceOff)
	}
}

// TestReview40ak_ReconcilerSuspendDuringPressActingSinceEarly: a host whose BMC
// only presses (fake.ButtonAll, an OS that shuts down in 20 s, readings
// 5 s old) gets a keyed (held) request; the controller's machine is
// suspended while its press is on its way (the BMC carries it out once
// the machine resumes; Reconciler.Monotonic nil is CLOCK_MONOTONIC, which
// does not count the suspend). The next pass writes Status.ActingSince
// from the monotonic instant the press returned (quiet.go quietSince),
// the suspend's length too early; the controller restarts a few seconds
// later, while the OS still shuts down, and the new one counts the press
// from that ActingSince (actedBound.bound): over long ago. Ground truth:
// the host must stay off while the keyed annotation is present (it does:
// the restarted controller still waits for a non-echo reading), and the
// ActingSince written must not be before the press returned (it is, by
// the suspend's length: the failure).
func TestReview40ak_ReconcilerSuspendDuringPressActingSinceEarly(t *testing.T) {
	for _, after := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second, 12 * time.Second} {
		t.Run(after.String(), func(t *testing.T) { review40akSuspendPress(t, after) })
	}
}

type suspendPress struct {
	*fake.Power
	clk       *fake.Clock
	suspend   time.Duration
	suspended time.Duration
	back      time.Time
}

func (s *suspendPress) Off(ctx context.Context, m power.Mode) error {
	if s.back.IsZero() {
		s.clk.Advance(s.suspend) // the machine sleeps before the press reaches the BMC
		s.suspended += s.suspend
		err := s.Power.Off(ctx, m)
		s.back = s.clk.Real()
		return err
	}
	return s.Power.Off(ctx, m)
}

func review40akSuspendPress(t *testing.T, after time.Duration) {
	ctx := context.Background()
	w := newReview36World()
	clk := w.clk
	cfg := w.cfg
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	sp := &suspendPress{Power: pw, clk: clk, suspend: 30 * time.Minute}
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: w.store, Now: clk.Now, Monotonic: func() time.Duration { return clk.Monotonic() - sp.suspended },
			Config: cfg, Power: func(string) (power.Controller, error) { return sp, nil }}
	}
	rec := newRec()
	for i := 0; i < 10; i++ { // the controller has run for a while
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	requestAt := clk.Real()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": ""}
	}))
	restarted := false
	var acting time.Time
	for end := requestAt.Add(50 * time.Minute); clk.Real().Before(end); {
		if !sp.back.IsZero() && !restarted && !clk.Real().Before(sp.back.Add(after)) {
			restarted = true
			st, err := w.store.Get(ctx, "h")
			require.NoError(t, err)
			acting = st.Status.ActingSince
			rec = newRec()
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if res.Decision.Power != reboot.ActionNone || testing.Verbose() && clk.Real().Before(sp.back.Add(time.Minute)) {
			t.Logf("%v on=%v %v %v %s %v", clk.Real().Sub(requestAt), pw.HardwareOn(), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 || next > time.Second {
			next = min(max(next, 100*time.Millisecond), time.Second)
		}
		clk.Advance(next)
	}
	require.True(t, restarted, "setup: the press was sent and the controller restarted")
	t.Logf("press returned at %v; ActingSince read at the restart: %v", sp.back.Sub(requestAt), acting.Sub(requestAt))
	if tc, ok := review36OnByCommandAfter(pw, requestAt); ok {
		t.Fatalf("the restarted controller counted the press (returned at %v, after a suspend of the controller) from ActingSince %v and powered the held host on at %v; truth %s",
			sp.back.Sub(requestAt), acting.Sub(requestAt), tc.At.Sub(requestAt), rebootcheck.DescribeTruth(pw))
	}
	require.False(t, pw.HardwareOn(), "the held host is on at the end; truth %s", rebootcheck.DescribeTruth(pw))
	if !acting.IsZero() && acting.Add(cfg.Precision).Before(sp.back) {
		t.Errorf("the Reconciler wrote Status.ActingSince %v, %v before its press returned (%v, wall and real time): the status says every power-off had returned by an instant before one did",
			acting.Sub(requestAt), sp.back.Sub(acting), sp.back.Sub(requestAt))
	}
}
