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

// review36aiAsyncRefusedOn is a press-only BMC (fake.ButtonAll) behind a
// kube.Async-like wrapper: the first power-on runs in the background past
// its pass (answered busy), every call answers busy until it ends
// `flight` later, and it ends refused before it reached the hardware (a
// login refused, power.ErrAuth): the host stays off. Handed to the next
// pass as a LateAnswer. The BMC is healthy afterwards.
type review36aiAsyncRefusedOn struct {
	*fake.Power
	clk      *fake.Clock
	flight   time.Duration
	started  bool
	endAt    time.Time
	lateDone bool
}

func (a *review36aiAsyncRefusedOn) inFlight() bool {
	return a.started && a.clk.Real().Before(a.endAt)
}

func (a *review36aiAsyncRefusedOn) State(ctx context.Context) (power.State, error) {
	if a.inFlight() {
		return power.StateUnknown, errOnInFlight
	}
	return a.Power.State(ctx)
}

func (a *review36aiAsyncRefusedOn) On(ctx context.Context) error {
	if a.inFlight() {
		return errOnInFlight
	}
	if !a.started {
		a.started, a.endAt = true, a.clk.Real().Add(a.flight)
		return errOnInFlight
	}
	return a.Power.On(ctx)
}

func (a *review36aiAsyncRefusedOn) Off(ctx context.Context, m power.Mode) error {
	if a.inFlight() {
		return errOnInFlight
	}
	return a.Power.Off(ctx, m)
}

func (a *review36aiAsyncRefusedOn) LateAnswer() (reboot.LateAnswer, bool) {
	if !a.started || a.lateDone || a.inFlight() {
		return reboot.LateAnswer{}, false
	}
	a.lateDone = true
	return reboot.LateAnswer{Action: reboot.ActionPowerOn,
		Err: fmt.Errorf("login refused: %w", power.ErrAuth)}, true
}

// TestReview36ai_LateRefusedPowerOnPressDelaysRetry: issue 36 item 3 ("A
// call that was not carried out (refused credentials, back-off, busy) is
// 'not tried': retry ... after RetryDelay"), doc.go ("A press refused
// before it reached the hardware (a refused login, ...) counts as none").
// A press-only BMC behind kube.Async: the power-on press of an Online
// host that is off runs 20 s in the background and ends with the login
// refused; the host stays off. Round 34 undoes a late-refused power-off
// (busyWas) but not a late-refused power-on press: sentOn noted it as a
// press landing at its busy pass (off.pressed, lost flight), and
// memory.late leaves that. Ground truth: the host, Online, off, BMC
// healthy after the refusal, must be powered on within RetryDelay +
// StaleReads + a few polls of the refusal.
func TestReview36ai_LateRefusedPowerOnPressDelaysRetry(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &review36aiAsyncRefusedOn{clk: clk, flight: 20 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.started && pw.lateDone, "the setup: the first power-on ran in the background and was refused late")
	refused := pw.endAt
	var firstOn time.Time
	for _, tr := range pw.Truth() {
		if tr.On {
			firstOn = tr.At
			break
		}
	}
	require.False(t, firstOn.IsZero(), "the Online host was never powered on; truth %s", rebootcheck.DescribeTruth(pw.Power))
	cfg := reboot.DefaultConfig()
	bound := cfg.RetryDelay + cfg.StaleReads + 3*cfg.PollInterval + 5*time.Second
	require.LessOrEqual(t, firstOn.Sub(refused), bound,
		"an Online host whose only power-on press was refused (login) late stayed off %v after the refusal (bound %v): the refused press kept counting as a press landing at its busy pass; truth %s",
		firstOn.Sub(refused), bound, rebootcheck.DescribeTruth(pw.Power))
}

// TestReview36ai_LateRefusedPowerOnPressHoldsSoftPress: doc.go ("A press
// refused before it reached the hardware (a refused login, ...) counts as
// none, also when it is the late answer of one answered busy in its
// pass"), issue 36 item 3 (a call not carried out is "not tried"). A
// press-only BMC behind kube.Async, reads up to 60 s late (StaleReads
// 60 s): the power-on press of an Online host that is off runs 2 s in
// the background (its pass answered busy) and ends with the login
// refused; the retry powers the host on. A soft reboot is asked as soon
// as the host is on. The refused power-on press still counts as a press
// that landed at its busy pass (sentOn: off.pressed for the busy answer,
// answerLost), which memory.late never undoes for a power-on (round 34's
// busyWas restore is for power-offs only), while the power-on that did
// press counts only through QuietFor: pressTimer holds the soft press
// until SoftTimeout + StaleReads after the refused press, minutes after
// the StaleReads the real power-on asks. Ground truth: the fake's call
// log (when the soft power-off reached the BMC).
func TestReview36ai_LateRefusedPowerOnPressHoldsSoftPress(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	w.cfg.StaleReads = 60 * time.Second
	pw := &review36aiAsyncRefusedOn{clk: clk, flight: 2 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	ctx := context.Background()
	for clk.Real().Before(start.Add(10*time.Minute)) && !pw.Power.HardwareOn() {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, time.Second))
	}
	require.True(t, pw.started && pw.lateDone && pw.Power.HardwareOn(), "the setup: the first power-on was refused late, the retry powered the host on; truth %s", rebootcheck.DescribeTruth(pw.Power))
	req := clk.Real()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": `{"mode":"soft"}`}
	}))
	review36uLoop(t, rec, clk, req.Add(10*time.Minute), start)
	var offs []fake.Call
	for _, c := range pw.Power.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(req) {
			offs = append(offs, c)
		}
	}
	require.NotEmpty(t, offs, "the setup: a power-off reached the BMC; truth %s", rebootcheck.DescribeTruth(pw.Power))
	bound := w.cfg.StaleReads + 3*w.cfg.PollInterval + 5*time.Second
	if w.cfg.PollInterval == 0 {
		bound = w.cfg.StaleReads + 20*time.Second
	}
	require.LessOrEqual(t, offs[0].At.Sub(req), bound,
		"a soft reboot asked %v after start, on a host powered on just before by a retry, reached the BMC (%v) only %v after the request (bound StaleReads + 3 polls = %v): the power-on press refused (login) late kept counting as a press landing at its busy pass (late.go memory.late undoes only power-offs); truth %s",
		req.Sub(start), offs[0].Mode, offs[0].At.Sub(req), bound, rebootcheck.DescribeTruth(pw.Power))
}
