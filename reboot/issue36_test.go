package reboot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// poweredOnByCommand returns the first power-on by command at or after
// from in the hardware's ground truth (zero if none).
func poweredOnByCommand(pw *fake.Power, from time.Time) time.Time {
	for _, tc := range pw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && !tc.At.Before(from) {
			return tc.At
		}
	}
	return time.Time{}
}

// Issue 36, point 1: on a BMC whose soft power-off is a press of the power
// button (no graceful reset type), an OS that takes 45 s to shut down and
// reads 20 s late, the soft reissue after ReissueAfter (60 s) pressed the
// button again on a stale On reading and powered the held host on. No
// press may go out unless a reading that cannot be an echo of the first
// press says On.
func TestIssue36SoftReissueNeverPressesHeldHostOn(t *testing.T) {
	for _, button := range []fake.ButtonKind{fake.ButtonSoft, fake.ButtonAll} {
		t.Run(button.String(), func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{Button: button, SoftDelay: 45 * time.Second, Lag: time.Second,
				Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}}, reboot.Host{Online: true})
			client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			tk, err := client.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			start := w.clk.Real()
			w.follow(t, 10*time.Minute, func() bool { return false })
			if on := poweredOnByCommand(w.pw, start); !on.IsZero() {
				t.Fatalf("the held host was powered on by the controller %v after the request; truth %v", on.Sub(start), describeTruth(w.pw))
			}
			require.False(t, w.pw.HardwareOn(), "held off")
			f, err := client.Fenced(w.ctx, tk)
			require.NoError(t, err)
			require.True(t, f, "fenced in the end")
		})
	}
}

func describeTruth(pw *fake.Power) string {
	s := ""
	for _, tc := range pw.Truth() {
		s += tc.At.Format("15:04:05.000") + " on=" + map[bool]string{true: "true", false: "false"}[tc.On] + " " + tc.Cause.String() + "; "
	}
	return s
}

// refusing is a power controller whose power-offs are refused with err
// (not carried out) until until; then it passes them through.
type refusing struct {
	power.Controller
	now   func() time.Time
	until time.Time
	err   error
}

func (r *refusing) Off(ctx context.Context, m power.Mode) error {
	if r.now().Before(r.until) {
		return r.err
	}
	return r.Controller.Off(ctx, m)
}

// Issue 36, point 3: a soft power-off refused because of the credentials
// (a password rotation in progress), refused by the Pool while it backs
// off after that, or refused as busy was not carried out: it is tried
// again soft after RetryDelay, and only SoftTimeout escalates to hard.
// (The old code counted ErrAuth and the Pool's refusal after it as a
// failed soft power-off and cut the power 10 ms after the request.)
func TestIssue36RefusedLoginIsNotTriedNotFailed(t *testing.T) {
	authErr := &power.Error{Op: "off soft", Class: power.ClassFailed, Status: 401, Message: "refused", Err: power.ErrAuth}
	for name, err := range map[string]error{
		"auth":    authErr,
		"backoff": &power.Error{Op: "off soft", Class: power.ClassFailed, Message: "not tried", Err: errors.Join(power.ErrBackoff, authErr)},
		"busy":    &power.Error{Op: "off soft", Class: power.ClassBusy, Status: 503},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{SoftDelay: 20 * time.Second}, reboot.Host{Online: true})
			ref := &refusing{Controller: w.pw, now: w.clk.Real, until: w.clk.Real().Add(45 * time.Second), err: err}
			w.r.Power = func(string) (power.Controller, error) { return ref, nil }
			client := &reboot.Client{Hosts: w.store, Key: "drain", Now: w.clk.Now}
			_, rerr := client.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, rerr)
			start := w.clk.Real()
			w.follow(t, 2*time.Minute, func() bool { return false })
			var soft []time.Duration
			for _, c := range w.pw.Calls() {
				if c.Op == fake.OpOff && c.Mode == power.ModeHard {
					t.Fatalf("hard power-off %v after the request, before SoftTimeout", c.At.Sub(start))
				}
				if c.Op == fake.OpOff {
					soft = append(soft, c.At.Sub(start))
				}
			}
			require.NotEmpty(t, soft, "soft power-off tried again once it was accepted")
			require.LessOrEqual(t, soft[0], 45*time.Second+reboot.DefaultConfig().RetryDelay, "tried again every RetryDelay")
			require.False(t, w.pw.HardwareOn(), "the OS shut down")
		})
	}
}

// Issue 36, point 4: a BMC that answers null for ten minutes while a
// reboot is pending is read backing off from QuickPoll to PollInterval, as
// after a power-off, not every QuickPoll for ever (the old code read it
// 600 times).
func TestIssue36UnknownReadingsBackOff(t *testing.T) {
	for _, mode := range []power.Mode{power.ModeHard, power.ModeSoft} {
		t.Run(mode.String(), func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{Report: fake.Report{Unknown: 1}}, reboot.Host{Online: true})
			client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			_, err := client.Request(w.ctx, "h", mode)
			require.NoError(t, err)
			before := len(w.pw.Calls())
			const span = 10 * time.Minute
			w.follow(t, span, func() bool { return false })
			reads := 0
			for _, c := range w.pw.Calls()[before:] {
				if c.Op == fake.OpState {
					reads++
				}
			}
			cfg := reboot.DefaultConfig()
			// PollInterval apart, plus the quick reads after each power-off
			// (sent again every ReissueAfter).
			bound := int(span/cfg.PollInterval) + int(span/cfg.ReissueAfter+1)*4
			require.LessOrEqual(t, reads, bound, "reads of a BMC that answers null in %v", span)
		})
	}
}
