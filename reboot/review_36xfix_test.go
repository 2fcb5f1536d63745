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

// nullMostOfPeriod answers PowerState null for all but the last sane of
// every period of the clock, honestly otherwise: long runs of null
// readings, each past the length after which the run is persisted
// (Status.UnsureSince), broken by short honest answers.
type nullMostOfPeriod struct {
	*fake.Power
	clk          *fake.Clock
	period, sane time.Duration
}

func (n nullMostOfPeriod) State(ctx context.Context) (power.State, error) {
	st, err := n.Power.State(ctx)
	at := time.Duration(n.clk.Real().UnixNano()) % n.period
	if err == nil && at < n.period-n.sane {
		return power.StateUnknown, nil
	}
	return st, err
}

// TestReview36xFix_LongNullRunsBoundedWrites: round 24's fix persists a
// run of unsure readings only once it lasts half of SoftTimeout +
// StaleReads (105 s), so 40 s runs write nothing; a BMC whose null runs
// last longer than that, broken by a few honest answers, would still
// write UnsureSince and clear it once per period (60 writes an hour for
// a 2-minute period) if an On or Off reading cleared it at once. A run
// ends only once sane readings have lasted StaleReads (A1: a shorter
// one may echo): held (keyed fence) and Online=false off hosts, null
// 110 s then honest 10 s or 25 s, over and over: at most 8 Status
// writes an hour, the host off throughout (ground truth).
func TestReview36xFix_LongNullRunsBoundedWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		online bool
		sane   time.Duration
	}{
		{"fenced/blip10s", true, 10 * time.Second},
		{"fenced/blip25s", true, 25 * time.Second},
		{"offline/blip10s", false, 10 * time.Second},
		{"offline/blip25s", false, 25 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			cfg := reboot.DefaultConfig()
			pw := fake.NewPower(clk.Real, fake.PowerConfig{})
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: tc.online})
			flap := false
			rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(string) (power.Controller, error) {
					if flap {
						return nullMostOfPeriod{pw, clk, 110*time.Second + tc.sane, tc.sane}, nil
					}
					return pw, nil
				}}
			review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
			if tc.online {
				require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
					h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
				}))
			}
			review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
			require.False(t, pw.HardwareOn(), "the setup: the host was powered off; truth %s", rebootcheck.DescribeTruth(pw))
			flap = true
			at := clk.Real()
			review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
			from, writes0 := clk.Real(), store.Updates()
			end := from.Add(time.Hour)
			review36uLoop(t, rec, clk, end, at)
			require.True(t, pw.OffThroughout(at, end), "the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
			writes := store.Updates() - writes0
			h, err := store.Get(ctx, "h")
			require.NoError(t, err)
			require.LessOrEqual(t, writes, 8,
				"an off host held (online=%v), its BMC null 110 s then honest %v, over and over: %d Status writes in an hour; status %+v",
				tc.online, tc.sane, writes, h.Status)
		})
	}
}
