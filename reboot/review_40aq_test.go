package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// loop40aq runs passes of h on the fake clock until end, tolerating
// pass errors (a dead BMC's reads).
func loop40aq(t *testing.T, rec *reboot.Reconciler, clk *fake.Clock, end, from time.Time) {
	t.Helper()
	ctx := context.Background()
	for clk.Real().Before(end) {
		res, err := rec.Reconcile(ctx, "h")
		if testing.Verbose() {
			t.Logf("%v %v %v %q perr=%v err=%v", clk.Real().Sub(from), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr, err)
		}
		next := res.RequeueAfter
		if err != nil || res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
}

// TestReview40aq_OnlineFalseAgainAfterUnreadableOnlineTrueCutHardAtOnce:
// f663e13 keeps OfflineSince (and OfflineMode, OfflineSoftSince's episode)
// with Online true again until a power-on is decided or an On reading
// that cannot echo. An operator sets Online=false; the soft power-off
// goes out; the OS ignores it (the host runs on: ground truth). A minute
// later the operator changes their mind (Online=true) while the BMC's
// reads time out for a while (no fresh On reading): the old enforcement
// is kept in the status. Ten minutes later the operator sets Online=false
// again and the BMC reads fine (On). This is a new Online=false on a
// running host: the package promises soft first, hard only SoftTimeout
// after its first soft power-off (the rule pinned by
// TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce). The kept
// episode's SoftTimeout has long passed: the running host is cut hard at
// once, its OS never asked to shut down for this Online=false. Before
// f663e13 Online=true cleared the episode and the new one went soft.
func TestReview40aq_OnlineFalseAgainAfterUnreadableOnlineTrueCutHardAtOnce(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var readsDead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true, Faults: func(c fake.Call) fake.Fault {
		if readsDead.Load() && c.Op == fake.OpState {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	loop40aq(t, rec, clk, start.Add(10*time.Minute), start)

	t0 := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, t0.Add(time.Minute), start)
	soft := false
	for _, c := range pw.Calls() {
		require.False(t, c.Op == fake.OpOff && c.Mode == power.ModeHard, "setup: no hard power-off in the first minute")
		soft = soft || c.Op == fake.OpOff && c.Mode == power.ModeSoft
	}
	require.True(t, soft && pw.HardwareOn(), "setup: soft power-off sent, ignored by the OS")

	readsDead.Store(true)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	loop40aq(t, rec, clk, clk.Real().Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "setup: the host runs on; truth %s", rebootcheck.DescribeTruth(pw))

	t2 := clk.Real()
	readsDead.Store(false)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, t2.Add(2*time.Minute), start)
	h, err := store.Get(context.Background(), "h")
	require.NoError(t, err)
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(t2) {
			require.Equal(t, power.ModeSoft, c.Mode,
				"a running host set Online=false again (after Online=true while its BMC's reads failed) is cut hard at +%v without a soft power-off for this Online=false (the kept episode's OfflineSince is from %v ago); status %+v; truth %s",
				c.At.Sub(t2), t2.Sub(t0), h.Status, rebootcheck.DescribeTruth(pw))
			return
		}
	}
	t.Fatalf("setup: no power-off after Online=false again; truth %s", rebootcheck.DescribeTruth(pw))
}

// nullReads40aq is a BMC whose reads answer PowerState null (Unknown,
// no error) while null is set; its calls work.
type nullReads40aq struct {
	*fake.Power
	null *atomic.Bool
}

func (n nullReads40aq) State(ctx context.Context) (power.State, error) {
	st, err := n.Power.State(ctx)
	if err == nil && n.null.Load() {
		return power.StateUnknown, nil
	}
	return st, err
}

// TestReview40aq_OnlineFalseAgainHostPoweredOnMeanwhileHeldAsOff: the
// same root cause, the other half of the kept episode (OfflineOffSeen).
// Online=false powers the host off (soft, the OS shuts down; known
// done). The operator sets Online=true while the BMC answers null: no
// power-on can go out, and f663e13 keeps OfflineSince and OfflineOffSeen.
// Seeing nothing happen, the operator powers it on by hand (truth: on),
// then sets Online=false again, the BMC still answering null. Before
// f663e13 this began a new enforcement (a soft power-off on a null
// reading, as TestReview36u_OfflineNullReadingsNeverPowerOff requires);
// now the kept OfflineOffSeen answers "off; held while Online is false"
// and the running host is left on under Online=false until the unsure
// run is long, then cut hard (stuckOff) without a soft power-off.
func TestReview40aq_OnlineFalseAgainHostPoweredOnMeanwhileHeldAsOff(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var null atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second})
	bmc := nullReads40aq{pw, &null}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	start := clk.Real()
	loop40aq(t, rec, clk, start.Add(10*time.Minute), start)

	t0 := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, t0.Add(3*time.Minute), start)
	h, err := store.Get(context.Background(), "h")
	require.NoError(t, err)
	require.True(t, !pw.HardwareOn() && !h.Status.OfflineOffSeen.IsZero(), "setup: off, known done; %+v", h.Status)

	null.Store(true)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	loop40aq(t, rec, clk, clk.Real().Add(time.Minute), start)
	pw.OutOfBandOn() // the operator, by hand
	loop40aq(t, rec, clk, clk.Real().Add(20*time.Second), start)

	t2 := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, t2.Add(10*time.Minute), start)
	h, err = store.Get(context.Background(), "h")
	require.NoError(t, err)
	var first *fake.Call
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(t2) {
			first = &c
			break
		}
	}
	require.NotNil(t, first, "no power-off at all in 10 min of Online=false on a running host; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, first.Mode == power.ModeSoft && first.At.Sub(t2) < cfg.PollInterval+time.Second,
		"a running host (powered on by hand while Online=true met null reads) set Online=false again: first power-off %v at +%v (want soft at once, as a new enforcement); status %+v; truth %s",
		first.Mode, first.At.Sub(t2), h.Status, rebootcheck.DescribeTruth(pw))
}
