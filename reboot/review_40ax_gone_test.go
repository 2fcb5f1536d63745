package reboot_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// goneStore40ax is a fake.RebootHosts whose host h can be deleted (Get:
// ErrNotFound, List: absent) and created again.
type goneStore40ax struct {
	*fake.RebootHosts
	gone atomic.Bool
}

func (s *goneStore40ax) Get(ctx context.Context, name string) (reboot.Host, error) {
	if name == "h" && s.gone.Load() {
		return reboot.Host{}, fmt.Errorf("host %s: %w", name, reboot.ErrNotFound)
	}
	return s.RebootHosts.Get(ctx, name)
}

func (s *goneStore40ax) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	if h.Name == "h" && s.gone.Load() {
		return reboot.Host{}, fmt.Errorf("host %s: %w", h.Name, reboot.ErrNotFound)
	}
	return s.RebootHosts.Update(ctx, h)
}

func (s *goneStore40ax) List(ctx context.Context) ([]reboot.Host, error) {
	hs, err := s.RebootHosts.List(ctx)
	if s.gone.Load() {
		hs = slices.DeleteFunc(hs, func(h reboot.Host) bool { return h.Name == "h" })
	}
	return hs, err
}

// TestReview40ax_GoneMemoryDroppedStaleOffReadFreshHostRunsUnderOnlineFalse:
// 974b6de's forgetGone (sweep.go) drops a gone host's memory at once when
// no pass runs and callsMayLand is false, "every call this Reconciler
// made to it has landed or cannot land any more". But a call that landed
// still echoes: a BMC reports the old state for a while after a change
// (fake Report.Stale, sushy-tools/iDRAC; Config.StaleReads = 30 s is the
// bound the decisions wait for, counted from the last power-on: QuietFor
// from memory.lastOn). Forget kept that bound (forgotten: lastOn = the
// Forget); a dropped memory is replaced by newMemory(base = the start),
// whose QuietFor counts from the process's start: the first read of the
// host re-created under the same name is taken as fresh. So: Online,
// off; our power-on is answered and lands at once, the BMC reads Off for
// 20 s more; the record is deleted a second later (the pass finds it
// gone: forgetGone drops the memory) and created again Online=false
// (re-registered: a fresh status), out of the inventory. The HostLister
// lists it (Online=false not yet enforced), its pass reads the stale Off
// as fresh, records it known off (idle's freshOff), and it is forgotten:
// the server runs under Online=false, unwatched, for good. Ground truth:
// fake.Power HardwareOn.
func TestReview40ax_GoneMemoryDroppedStaleOffReadFreshHostRunsUnderOnlineFalse(t *testing.T) {
	recreated40ax(t, false)
}

// TestReview40ax_ForgottenRecreatedHostStaleOffWaited (passing, control
// for the test above): the same deletion noticed by Reconciler.Forget
// (the memory kept, lastOn at the Forget) instead of Loop's forgetGone:
// the stale Off is not taken as fresh, the host is read On and powered
// off under Online=false.
func TestReview40ax_ForgottenRecreatedHostStaleOffWaited(t *testing.T) {
	recreated40ax(t, true)
}

func recreated40ax(t *testing.T, forget bool) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Report: fake.Report{Stale: 20 * time.Second}})
	store := &goneStore40ax{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(),
		Power: func(string) (power.Controller, error) { return pw, nil }}
	var inv atomic.Bool
	inv.Store(true)
	l := rec.Loop(func(context.Context) ([]string, error) {
		if inv.Load() {
			return []string{"h"}, nil
		}
		return nil, nil
	})
	for i := 0; ; i++ {
		require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if res.Decision.Power == reboot.ActionPowerOn {
			require.NoError(t, res.PowerErr)
			break
		}
		clk.Advance(time.Second)
	}
	require.True(t, pw.HardwareOn(), "setup: the power-on landed")
	clk.Advance(time.Second)
	// Deleted: the next pass finds it gone (forgetGone).
	store.gone.Store(true)
	inv.Store(false)
	if forget {
		rec.Forget("h")
	} else {
		n, err := l.Reconcile(ctx, "h")
		require.NoError(t, err)
		require.True(t, n.Release, "setup: the pass found h gone")
	}
	clk.Advance(time.Second)
	// Created again, Online=false, a fresh status, out of the inventory.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online, h.Status = false, reboot.Status{} }))
	store.gone.Store(false)
	busy := map[string]bool{}
	heldH := runKeys40aw(t, l, clk, clk.Real().Add(10*time.Minute), busy, nil)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Online, "setup: h still Online=false")
	require.False(t, pw.HardwareOn() && !heldH,
		"a host re-created Online=false 2 s after our power-on landed (the BMC still read Off, stale) runs under Online=false 10 min later and is not held (status %+v; truth %s)",
		h.Status, rebootcheck.DescribeTruth(pw))
}
