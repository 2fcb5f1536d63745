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

// slowRead is B's controller for h: its State read runs during (hook),
// as a slow BMC's GET does, while other hosts' passes go on.
type slowRead struct {
	*fake.Power
	hook func()
}

func (s *slowRead) State(ctx context.Context) (power.State, error) {
	if f := s.hook; f != nil {
		s.hook = nil
		f()
	}
	return s.Power.State(ctx)
}

// pressOnly is A's controller: its power-off runs (before), which sends
// the press itself when it lands.
type pressOnly struct {
	*fake.Power
	before func()
}

func (p pressOnly) Off(context.Context, power.Mode) error {
	p.before()
	return nil
}

// Review 36 round 8: Reconcile decides whether a pass stands by from
// r.leading when it takes r.mu (after its power read), but dates what it
// reads at m, read before that power read. The Reconciler is concurrent
// across hosts: while h's pass waits on a slow BMC, another host's pass
// (y) makes the first successful Hold (noteHold(true): leadAt = then,
// lead() on h's memory, whose heard is empty since h was read before the
// request). h's pass then finds r.leading true, so it is not a standby
// pass, and takes A's LastPress (foreign) as a press sent at m: before
// leadAt, before A's lease ended, before A's press reached the BMC.
// doc.go promises "once it leads ... as sent no earlier than that Hold".
// Here B's h pass starts 1 s after A wrote LastPress (A holds the lease:
// its probe is refused), its State read takes 14 s, during which A's press
// lands (at 14 s, within A's lease, which ends at 15 s) and B's pass of y
// takes the lease. B counts the press 13 s early and presses the button of
// the held host on an echo (SoftTimeout + StaleReads after its m), powering
// it on while the keyed annotation is present.
func TestReview36h_ConcurrentLeadDatesForeignPressBeforeHold(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	py := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "y", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	sb := &slowRead{Power: pw}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(n string) (power.Controller, error) {
			if n == "y" {
				return py, nil
			}
			return sb, nil
		}, Guard: &leaseGuard{l: lease, id: "b"}}
	var start time.Time
	pa := pressOnly{Power: pw}
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pa, nil }, Guard: &leaseGuard{l: lease, id: "a"}}
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // B stands by and reads h (no request yet)
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start = clk.Real()
	pa.before = func() {
		clk.Advance(time.Second)
		// B's pass of h: Get, probe (refused: A leads), clocks, then a
		// slow power read.
		sb.hook = func() {
			clk.Advance(start.Add(14 * time.Second).Sub(clk.Real()))
			require.NoError(t, pw.Off(ctx, power.ModeSoft)) // A's press lands
			clk.Advance(time.Second)
			lease.give("b", time.Hour) // A's lease ended; B takes it
			_, err := rb.Reconcile(ctx, "y")
			require.NoError(t, err)
		}
		_, err := rb.Reconcile(ctx, "h")
		require.NoError(t, err)
	}
	_, _ = ra.Reconcile(ctx, "h") // A writes LastPress and sends the press
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (LastPress persisted)")
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
		t.Fatalf("B, whose pass of h overlapped the Hold that began its leadership, dated A's press before that Hold, pressed the button of the held host and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}

// slowPress is a Toggler whose power-off reaches the BMC some time after
// the call began (callTime): the adapter takes the BMC's lock, logs in,
// reads the state (IPMI soft shutdown and Redfish PushPowerButton read
// first), then presses; the call returns success once the press is in.
type slowPress struct {
	*fake.Power
	clk      *fake.Clock
	callTime time.Duration
}

func (s slowPress) Off(ctx context.Context, m power.Mode) error {
	s.clk.Advance(s.callTime)
	return s.Power.Off(ctx, m)
}

// Review 36 round 8: pressWait lets a press out SoftTimeout + StaleReads
// after the previous press (Observed.SincePress), and SincePress counts
// from sendingOff, the monotonic time read before the call began
// (reconciler.go Reconcile: m before pc.Off; tracker.go Sending). A press
// reaches the hardware when the call does: up to the call's return (done,
// which sentOff keeps only as pressDone, for PressOver). A2 bounds the
// shutdown from the press, so an On reading taken SoftTimeout + StaleReads
// after the call began may still echo the OS running while the hardware is
// off by then. Here the call takes 10 s (lock, login, state read, press,
// on a slow BMC), the OS shuts down 179 s after the press (within
// SoftTimeout), reads are 29 s old (within StaleReads): the controller
// presses again 210 s after the first call began, on an echo, and powers
// the held host on.
func TestReview36h_PressCountsFromCallStartNotItsLanding(t *testing.T) {
	cfg := reboot.DefaultConfig()
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}}, reboot.Host{Online: true})
	sp := slowPress{Power: w.pw, clk: w.clk, callTime: 10 * time.Second}
	w.r.Power = func(string) (power.Controller, error) { return sp, nil }
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	_, err := client.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	w.follow(t, 6*time.Minute, func() bool { return false })
	if on := poweredOnByCommand(w.pw, start); !on.IsZero() {
		t.Fatalf("the controller pressed the button of the held host (keyed annotation present) on an echo and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(w.pw))
	}
}

// asyncPress is a LateAnswerer as kube.Async is: its power-off runs in the
// background, the pass that made it is answered busy at once, the press
// reaches the BMC landAfter later (a slow login and state read) and its
// answer (success) is kept for the next pass.
type asyncPress struct {
	*fake.Power
	clk       *fake.Clock
	landAfter time.Duration
	landAt    time.Time // zero: nothing in flight
	mode      power.Mode
	answer    *reboot.LateAnswer
}

func (a *asyncPress) land(ctx context.Context) {
	if !a.landAt.IsZero() && !a.clk.Real().Before(a.landAt) {
		a.landAt = time.Time{}
		err := a.Power.Off(ctx, a.mode)
		a.answer = &reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: a.mode, Err: err}
	}
}

func (a *asyncPress) State(ctx context.Context) (power.State, error) {
	a.land(ctx)
	return a.Power.State(ctx)
}

func (a *asyncPress) Off(_ context.Context, m power.Mode) error {
	if !a.landAt.IsZero() {
		return fmt.Errorf("still running: %w", power.ErrBusy)
	}
	a.landAt, a.mode = a.clk.Real().Add(a.landAfter), m
	return fmt.Errorf("BMC call still running: %w", power.ErrBusy)
}

func (a *asyncPress) LateAnswer() (reboot.LateAnswer, bool) {
	if a.answer == nil {
		return reboot.LateAnswer{}, false
	}
	la := *a.answer
	a.answer = nil
	return la, true
}

// Review 36 round 8: the same with a LateAnswerer (kube.Async, as the
// binary runs every BMC call). The pass that sends the press is answered
// busy after Async.Wait; the call goes on in the background, under the
// pool's call and connect timeouts (the binary's Async.Timeout is 2 ×
// (call + connect) + 30 s), and the press reaches the BMC when it gets
// there. memory.late records the late answer's class only ("what it knows
// of power-offs is unchanged: the call counted as sent"): SincePress still
// counts from the pass that sent it, not from the answer that shows when
// it was still in flight. Here the press lands 100 s after it was sent
// (its success is answered then), the OS takes 100 s to shut down, reads
// are 29 s old: the controller presses again 210 s after the first was
// sent, on an echo, 10 s after the host went off, and powers it on.
func TestReview36h_LateAnsweredPressCountsFromSending(t *testing.T) {
	cfg := reboot.DefaultConfig()
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 100 * time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}}, reboot.Host{Online: true})
	ap := &asyncPress{Power: w.pw, clk: w.clk, landAfter: 100 * time.Second}
	w.r.Power = func(string) (power.Controller, error) { return ap, nil }
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	_, err := client.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	for end := start.Add(6 * time.Minute); w.clk.Real().Before(end); {
		res, err := w.r.Reconcile(w.ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		if !ap.landAt.IsZero() {
			next = min(next, time.Second) // Async.Done wakes the host when the call ends
		}
		w.clk.Advance(next)
	}
	if on := poweredOnByCommand(w.pw, start); !on.IsZero() {
		t.Fatalf("the controller pressed the button of the held host (keyed annotation present) on an echo and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(w.pw))
	}
}
