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

// review36ahAsyncOn is a press-only BMC (fake.ButtonAll) behind a
// kube.Async-like wrapper: the first power-on runs in the background past
// its pass (answered busy, no status), every call answers busy until it
// ends `flight` later, and the BMC carries the press out as the call
// returns (a slow iLO: lock, login, state read first). Its answer, a
// success, is handed to the next pass as a LateAnswer.
type review36ahAsyncOn struct {
	*fake.Power
	clk      *fake.Clock
	flight   time.Duration
	started  bool
	landed   bool
	endAt    time.Time
	lateDone bool
	// lateErr is the late answer's error (nil: accepted).
	lateErr error
}

func (a *review36ahAsyncOn) inFlight() bool { return a.started && a.clk.Real().Before(a.endAt) }

// settle carries the press out at the background call's return.
func (a *review36ahAsyncOn) settle() {
	if a.started && !a.landed && !a.clk.Real().Before(a.endAt) {
		a.landed = true
		_ = a.Power.On(context.Background())
	}
}

func (a *review36ahAsyncOn) State(ctx context.Context) (power.State, error) {
	a.settle()
	if a.inFlight() {
		return power.StateUnknown, errOnInFlight
	}
	return a.Power.State(ctx)
}

func (a *review36ahAsyncOn) On(ctx context.Context) error {
	a.settle()
	if a.inFlight() {
		return errOnInFlight
	}
	if !a.started {
		a.started, a.endAt = true, a.clk.Real().Add(a.flight)
		return errOnInFlight
	}
	return a.Power.On(ctx)
}

func (a *review36ahAsyncOn) Off(ctx context.Context, m power.Mode) error {
	a.settle()
	if a.inFlight() {
		return errOnInFlight
	}
	return a.Power.Off(ctx, m)
}

func (a *review36ahAsyncOn) LateAnswer() (reboot.LateAnswer, bool) {
	a.settle()
	if !a.started || a.lateDone || a.inFlight() {
		return reboot.LateAnswer{}, false
	}
	a.lateDone = true
	return reboot.LateAnswer{Action: reboot.ActionPowerOn, Err: a.lateErr}, true
}

// TestReview36ah_LateAnsweredPowerOnPressPressedAgainOnEcho: round 33's
// bug (TestReview36ag_SlowPowerOnPressPressedAgainOnEcho) through the
// late-answer path. Issue 36 item 1 (no toggle unless a reading that
// cannot be an echo shows the opposite state), doc.go/A5 (an answered
// call counts from its return; LateAnswerer: the late answer is recorded
// "as the outcome of a call that returned now"). A press-only BMC behind
// kube.Async: the power-on press of an Online host that is off runs 60 s
// in the background (its pass answered busy) and lands as it returns.
// memory.late (late.go) settles the lost call but never moves lastOn
// (QuietFor's base) to the late answer, and lastPress stays at the busy
// pass: at the first pass after the answer QuietFor and SincePress are
// 60 s >= StaleReads (30 s), the reading (30 s old) still says Off, and a
// second press shuts down the host the first just powered on. Ground
// truth: once powered on, the Online host with no request stays on.
func TestReview36ah_LateAnsweredPowerOnPressPressedAgainOnEcho(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &review36ahAsyncOn{clk: clk, flight: 60 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: w.cfg.StaleReads, NoTransitioning: true}})}
	// The BMC carried the press out and answered it with an error (an
	// HTTP 500 after the reset went through): answered, not lost, not
	// accepted (as TestReview36ag_SlowPowerOnPressPressedAgainOnEcho's).
	pw.lateErr = &power.Error{Op: "on", Class: power.ClassFailed, Status: 500, Message: "internal error"}
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(20*time.Minute), start)
	var firstOn time.Time
	for _, tr := range pw.Truth() {
		if tr.On {
			firstOn = tr.At
			break
		}
	}
	require.True(t, pw.landed && pw.lateDone && !firstOn.IsZero(), "the setup: the background press landed and was answered late; truth %s", rebootcheck.DescribeTruth(pw.Power))
	require.False(t, pw.WasOffDuring(firstOn, clk.Real()),
		"an Online host powered on by a power-on press answered late (it ran %v in the background and landed as it returned) was pressed off again on an Off reading that echoes the state before it (late.go memory.late leaves lastOn/lastPress at the busy pass); On calls %d; truth %s",
		pw.flight, review36xCount(pw.Power, fake.OpOn, start), rebootcheck.DescribeTruth(pw.Power))
}

// review36ahTrackerPass is trackerPass (tracker_test.go) for a controller
// that answers late (kube's path): the late answer is reported to
// Tracker.Late after the state read, before Observe, as Tracker's doc
// says.
func review36ahTrackerPass(ctx context.Context, tr *reboot.Tracker, cfg reboot.Config, hosts reboot.HostStore, pc *review36ahAsyncOn, clk *fake.Clock) (reboot.Decision, error) {
	h, err := hosts.Get(ctx, "h")
	if err != nil {
		return reboot.Decision{}, err
	}
	rd := reboot.Reading{Host: h, Now: clk.Now(), Mono: clk.Monotonic()}
	if rd.Power, err = pc.State(ctx); err != nil {
		rd.Power = power.StateUnknown
	}
	rd.ReadEnd = clk.Monotonic()
	rd.SoftToggles, rd.HardToggles = pc.TogglesOff(power.ModeSoft), pc.TogglesOff(power.ModeHard)
	rd.OnToggles = pc.TogglesOn()
	if a, ok := pc.LateAnswer(); ok {
		tr.Late(a, clk.Now(), clk.Monotonic())
	}
	d := cfg.Decide(tr.Observe(rd, cfg), rd.Now)
	written := ""
	if d.UpdateStatus {
		nh := h
		nh.Status = d.Status
		nh.Annotations = map[string]string{}
		for k, v := range h.Annotations {
			nh.Annotations[k] = v
		}
		for _, k := range d.RemoveAnnotations {
			delete(nh.Annotations, k)
		}
		tr.Writing(d)
		w, err := hosts.Update(ctx, nh)
		if err != nil {
			return d, err
		}
		written = w.Version
	}
	tr.Applied(d, written)
	if d.Power != reboot.ActionNone {
		tr.Sending(d.Power, d.Mode, clk.Monotonic())
		if d.Power == reboot.ActionPowerOn {
			err = pc.On(ctx)
		} else {
			err = pc.Off(ctx, d.Mode)
		}
		tr.Sent(reboot.Call{Action: d.Power, Mode: d.Mode, Class: reboot.CallClass(err), At: clk.Now()}, err, clk.Monotonic())
		if err != nil {
			d.RequeueAfter = 0
		}
	}
	return d, nil
}

// TestReview36ah_TrackerLateAnsweredPowerOnPressPressedAgainOnEcho: as
// TestReview36ah_LateAnsweredPowerOnPressPressedAgainOnEcho for a caller
// that runs Decide with a Tracker and reports the late answer with
// Tracker.Late (kube's path): Late (tracker.go) hands it to memory.late,
// which does not date the power-on at the answer either.
func TestReview36ah_TrackerLateAnsweredPowerOnPressPressedAgainOnEcho(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	pw := &review36ahAsyncOn{clk: clk, flight: 60 * time.Second,
		lateErr: &power.Error{Op: "on", Class: power.ClassFailed, Status: 500, Message: "internal error"},
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: cfg.StaleReads, NoTransitioning: true}})}
	tr := &reboot.Tracker{}
	start := clk.Real()
	for clk.Real().Before(start.Add(20 * time.Minute)) {
		d, err := review36ahTrackerPass(ctx, tr, cfg, hosts, pw, clk)
		require.NoError(t, err)
		if testing.Verbose() && d.Power != reboot.ActionNone {
			t.Logf("%v %v %s", clk.Real().Sub(start), d.Power, d.Reason)
		}
		clk.Advance(min(max(d.RequeueAfter, time.Second), 30*time.Second))
	}
	var firstOn time.Time
	for _, tc := range pw.Truth() {
		if tc.On {
			firstOn = tc.At
			break
		}
	}
	require.True(t, pw.landed && pw.lateDone && !firstOn.IsZero(), "the setup: the background press landed and was answered late; truth %s", rebootcheck.DescribeTruth(pw.Power))
	require.False(t, pw.WasOffDuring(firstOn, clk.Real()),
		"Tracker: an Online host powered on by a power-on press answered late (ran %v in the background, landed as it returned) was pressed off again on an Off echo; On calls %d; truth %s",
		pw.flight, review36xCount(pw.Power, fake.OpOn, start), rebootcheck.DescribeTruth(pw.Power))
}

// review36ahAsyncRefusedSoft is a BMC whose soft power-off presses the
// power button (fake.ButtonSoft) behind a kube.Async-like wrapper: the
// first soft power-off runs in the background past its pass (answered
// busy), every call answers busy until it ends `flight` later, and it
// ends refused before it reached the hardware (a login refused: a
// password rotation in progress, power.ErrAuth), handed to the next pass
// as a LateAnswer. The BMC is healthy afterwards.
type review36ahAsyncRefusedSoft struct {
	*fake.Power
	clk      *fake.Clock
	flight   time.Duration
	started  bool
	endAt    time.Time
	lateDone bool
}

func (a *review36ahAsyncRefusedSoft) inFlight() bool {
	return a.started && a.clk.Real().Before(a.endAt)
}

func (a *review36ahAsyncRefusedSoft) State(ctx context.Context) (power.State, error) {
	if a.inFlight() {
		return power.StateUnknown, errOnInFlight
	}
	return a.Power.State(ctx)
}

func (a *review36ahAsyncRefusedSoft) On(ctx context.Context) error {
	if a.inFlight() {
		return errOnInFlight
	}
	return a.Power.On(ctx)
}

func (a *review36ahAsyncRefusedSoft) Off(ctx context.Context, m power.Mode) error {
	if a.inFlight() {
		return errOnInFlight
	}
	if !a.started && m == power.ModeSoft {
		a.started, a.endAt = true, a.clk.Real().Add(a.flight)
		return errOnInFlight
	}
	return a.Power.Off(ctx, m)
}

func (a *review36ahAsyncRefusedSoft) LateAnswer() (reboot.LateAnswer, bool) {
	if !a.started || a.lateDone || a.inFlight() {
		return reboot.LateAnswer{}, false
	}
	a.lateDone = true
	return reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeSoft,
		Err: fmt.Errorf("login refused: %w", power.ErrAuth)}, true
}

// TestReview36ah_LateRefusedSoftPressBlocksRetryThenCutHard: issue 36
// item 3: "A call that was not carried out (refused credentials,
// back-off, busy) is 'not tried': retry soft after RetryDelay and leave
// escalation to SoftTimeout"; doc.go: "A press refused before it reached
// the hardware (a refused login, ...) counts as none". A press-soft BMC
// behind kube.Async: the soft press of a soft request runs 20 s in the
// background (its pass answered busy) and ends with the login refused.
// The busy pass noted it as a press sent at its return (sentOff:
// answerLost), and memory.late (late.go), for an answer not carried out,
// undoes nothing: SincePress stays counted from the busy pass, so
// pressTimer holds every soft retry until SoftTimeout + StaleReads after
// it, while softTimedOut cuts hard SoftTimeout after SoftSince: the host
// is powered off hard without any soft power-off ever having reached it.
// Ground truth: the fake's call log (no soft power-off reached the BMC
// before the hard one).
func TestReview36ah_LateRefusedSoftPressBlocksRetryThenCutHard(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &review36ahAsyncRefusedSoft{clk: clk, flight: 20 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOn, Button: fake.ButtonSoft, SoftDelay: 30 * time.Second,
			Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(2*time.Minute), start)
	req := clk.Real()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": `{"mode":"soft"}`}
	}))
	review36uLoop(t, rec, clk, req.Add(10*time.Minute), start)
	require.True(t, pw.started && pw.lateDone, "the setup: the first soft press ran in the background and was refused late")
	var offs []fake.Call
	for _, c := range pw.Power.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(req) {
			offs = append(offs, c)
		}
	}
	require.NotEmpty(t, offs, "the setup: a power-off reached the BMC; truth %s", rebootcheck.DescribeTruth(pw.Power))
	require.Equal(t, power.ModeSoft, offs[0].Mode,
		"a soft request whose only soft press was refused (login) late was cut hard at %v without any soft power-off reaching the BMC (the refused press kept counting as a press sent at its busy pass, holding every soft retry); truth %s",
		offs[0].At.Sub(req), rebootcheck.DescribeTruth(pw.Power))
}
