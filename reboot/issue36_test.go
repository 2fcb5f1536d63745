package reboot_test

import (
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
