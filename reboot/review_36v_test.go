package reboot_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// lostFirstHardOff is a BMC that answers PowerState null while the host
// runs (nullWhileOn) and accepts its first hard power-off without
// carrying it out (an accepted ForceOff lost inside the BMC, or skipped
// by the adapter on a read of its own: the case decide.go's wait names,
// "the Controller may have skipped it ... or it was lost").
type lostFirstHardOff struct {
	nullWhileOn
	mu   *sync.Mutex
	lost *bool
}

func (s lostFirstHardOff) Off(ctx context.Context, m power.Mode) error {
	s.mu.Lock()
	if m == power.ModeHard && !*s.lost {
		*s.lost = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.nullWhileOn.Off(ctx, m)
}

// Review 36 round 22 (TestReview36v_OfflineLostHardOffNeverRepeatedOnNull):
// cbfa294 added to idle (decide.go, "Online is false; power-off accepted,
// power state ...: wait") a branch that never repeats an Online=false
// power-off once it was accepted while the readings are unknown or
// transitioning. A hard power-off accepted but not carried out (lost, or
// skipped by the adapter) is then never sent again on a BMC answering
// null while the host runs: the host runs for ever with Online=false.
// The pending path repeats the same accepted hard power-off every
// ReissueAfter on the same readings (wait: default delay), so a reboot
// recovers and Online=false does not.
func TestReview36v_OfflineLostHardOffNeverRepeatedOnNull(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, cfg, store := w.clk, w.cfg, w.store
	// The OS ignores the soft request: only the hard fallback powers it off.
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	var mu sync.Mutex
	lost := false
	ctl := lostFirstHardOff{nullWhileOn{pw}, &mu, &lost}
	rec := w.settled(t, ctl)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	end := at.Add(60 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, lost, "the first hard power-off was never sent")
	require.True(t, pw.WasOffDuring(at, at.Add(cfg.SoftTimeout+cfg.ReissueAfter+5*time.Minute)),
		"Online=false on a BMC answering null while the host runs, first hard power-off accepted but lost: not powered off within SoftTimeout + ReissueAfter + 5 min (at all in 60 min: %v); status %+v; truth %s",
		pw.WasOffDuring(at, end), h.Status, rebootcheck.DescribeTruth(pw))
}

// bootingIgnoresSoft is a host whose OS ignores a soft power-off (ACPI
// power button event) until it has booted: while the hardware is powering
// on (the BMC reads Transitioning, PoweringOn) the request is accepted and
// does nothing, as during POST. Once the host is on it shuts down
// SoftDelay after the request.
type bootingIgnoresSoft struct{ *fake.Power }

func (s bootingIgnoresSoft) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft && s.Power.Current() != power.StateOn && s.Power.HardwareOn() {
		return nil // POST: nothing listens to the power button yet
	}
	return s.Power.Off(ctx, m)
}

// Review 36 round 22 (TestReview36v_SoftRequestWhilePoweringOnCutHard):
// cbfa294 made pending (decide.go, sentOff) send a soft power-off on a
// Transitioning reading unless this reboot already sent one, and stamp
// SoftSince with it. A Transitioning reading is also a host powering ON
// (the controller's own power-on, PoweringOn, lasts through POST). A soft
// request that arrives then gets its GracefulShutdown sent to a host that
// is not up yet (ignored), SoftTimeout counts from that, and the soft
// power-off the OS can act on (the reissue once it reads On, ReissueAfter
// later) gets SoftTimeout - ReissueAfter: an OS that shuts down within
// SoftTimeout (off 150 s after it, of 180 s) is cut hard mid-shutdown. Before cbfa294
// the controller waited on Transitioning and sent the soft power-off on
// the On reading, with its full SoftTimeout. doc.go: "A soft work is so
// never cut hard before its soft power-off had SoftTimeout".
func TestReview36v_SoftRequestWhilePoweringOnCutHard(t *testing.T) {
	ctx := context.Background()
	w, pw, rec := review36InPOST(t)
	clk, store := w.clk, w.store
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ""}
	}))
	end := requestAt.Add(20 * time.Minute)
	review36uLoop(t, rec, clk, end, requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, end), "not rebooted at all; truth %s", rebootcheck.DescribeTruth(pw))
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && c.Mode == power.ModeHard && c.At.After(requestAt) {
			t.Fatalf("a soft reboot requested while the host was powering on (Transitioning) was cut hard at +%v: the soft power-off went out during POST (ignored) and SoftTimeout counted from it; the OS is off 150 s after a soft power-off it hears (< SoftTimeout). status %+v; calls %+v; truth %s",
				c.At.Sub(requestAt), h.Status, pw.Calls(), rebootcheck.DescribeTruth(pw))
		}
	}
}

// Review 36 round 22 (TestReview36v_OfflineWhilePoweringOnCutHard): the
// same in idle (decide.go, "case !o.Online && o.Power != power.StateOff",
// cbfa294): Online set false while the controller's own power-on is in
// POST (Transitioning) begins the enforcement at once, its soft power-off
// goes out to a host that is not up (ignored), OfflineSoftSince is
// stamped with it, and the OS, which shuts down within SoftTimeout of a
// soft power-off it hears, is cut hard mid-shutdown. Before cbfa294 the
// enforcement began on the first On reading.
func TestReview36v_OfflineWhilePoweringOnCutHard(t *testing.T) {
	ctx := context.Background()
	w, pw, rec := review36InPOST(t)
	clk, store := w.clk, w.store
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	end := at.Add(20 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, end), "not powered off at all; truth %s", rebootcheck.DescribeTruth(pw))
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && c.Mode == power.ModeHard && c.At.After(at) {
			t.Fatalf("Online=false set while the host was powering on (Transitioning) was enforced by a hard cut at +%v: the soft power-off went out during POST (ignored) and SoftTimeout counted from it; the OS is off 150 s after a soft power-off it hears (< SoftTimeout). status %+v; truth %s",
				c.At.Sub(at), h.Status, rebootcheck.DescribeTruth(pw))
		}
	}
}

// Review 36 round 22 (TestReview36v_OfflineOffHostFlappingNullChurnsStatus):
// since cbfa294 idle (decide.go, "case !o.Online && o.Power !=
// power.StateOff") begins an Online=false enforcement on an unknown
// reading (OfflineSince, Works++), and a fresh Off reading ends it
// (OfflineSince zeroed). A host that is off, with Online=false, whose BMC
// answers null on half its reads (Report.Unknown, issue 36 point 4's BMC)
// so gets a new enforcement, a Status write with it, on every Off/null
// flip: hundreds an hour, for ever, for a host that has been off all
// along (ground truth). Before cbfa294 an unknown reading changed
// nothing. (Only one power-off goes out: wait holds the accepted soft
// one.)
func TestReview36v_OfflineOffHostFlappingNullChurnsStatus(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Report: fake.Report{Unknown: 0.5, Seed: 7}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	at := clk.Real()
	end := at.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, pw.WasOnAt(end), "the host was powered on")
	require.LessOrEqual(t, int64(h.Status.Works), int64(2),
		"an off host (ground truth: off for the whole hour: %v) with Online=false whose BMC answers null on half its reads started %d Online=false enforcements in an hour (a Status write each)",
		pw.WasOffDuring(at, end), h.Status.Works)
}
