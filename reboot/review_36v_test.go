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
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	// The OS ignores the soft request: only the hard fallback powers it off.
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	var mu sync.Mutex
	lost := false
	ctl := lostFirstHardOff{nullWhileOn{pw}, &mu, &lost}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return ctl, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
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
