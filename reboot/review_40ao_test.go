package reboot_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// fastCfg is the reboot Config of these tests.
var fastCfg40ao = reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond,
	QuickPoll: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, RetryDelay: 200 * time.Millisecond}

// fence40ao runs a first controller process (Reconciler + Runner) that
// fences host h for a keyed client, then stops it: the host is off, held
// by the client's request, and the store's status says so.
func fence40ao(t *testing.T, store *fake.RebootHosts, hw *fake.Power) (*reboot.Client, reboot.Ticket) {
	t.Helper()
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: fastCfg40ao}
	l := rec.Loop(func(context.Context) ([]string, error) { return []string{"h"}, nil })
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	require.True(t, hw.WasOffDuring(tk.At, time.Now()), "setup: fenced")
	require.ErrorIs(t, stop(), context.Canceled) // the first process ends
	require.False(t, hw.HardwareOn(), "setup: held off")
	return cl, tk
}

// TestReview40ao_RestartedControllerForgetsFencedHostAfterTransientBMCError:
// a controller restarts while a host is fenced (held off by a keyed
// request; the store's status shows the reboot pending). In the new
// process the host is listed, but its first passes fail for a moment
// (the power controller factory cannot get the BMC's credentials yet:
// Reconcile returns at reconciler.go:630, after reading the host record
// that shows the pending reboot, before Busy is computed). The operator
// drops the host from the inventory meanwhile. A new key "starts not
// busy", so the next Resync tick forgets it although the store says a
// reboot of ours is under way; the BMC comes back, the fencer releases,
// and nothing ever powers the host on again. The same failure in the
// process that fenced it keeps the key (its last successful pass said
// busy): only a restart loses it. Judged by the fake hardware's truth.
func TestReview40ao_RestartedControllerForgetsFencedHostAfterTransientBMCError(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	cl, tk := fence40ao(t, store, hw)

	// The second process: its BMC credentials are not there yet.
	var down atomic.Bool
	var tries atomic.Int32
	down.Store(true)
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power: func(string) (power.Controller, error) {
			tries.Add(1)
			if down.Load() {
				return nil, errors.New("bmc credentials: secret store not ready")
			}
			return hw, nil
		},
		Config: fastCfg40ao}
	var dropped atomic.Bool
	l := rec.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{}, nil
		}
		return []string{"h"}, nil
	})
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}})
	defer stop()
	require.Eventually(t, func() bool { return tries.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	dropped.Store(true)                // taken out of the inventory while fenced
	time.Sleep(400 * time.Millisecond) // a few Resync ticks
	down.Store(false)                  // the BMC's credentials are back
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.Release(ctx, tk))
	deadline := time.Now().Add(8 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, hw.HardwareOn(),
		"a fenced host, dropped from the listing after a restart whose first passes failed (%d factory tries), is still off 8 s after its release (store status pending: %v): the new process forgot it",
		tries.Load(), st.Status.Pending())
}

// TestReview40ao_RestartWithFencedHostUnlistedLeavesItOff: the same
// restart with the host dropped from the inventory while the controller
// was down: the new process never lists it, and the reboot Loop (unlike
// remediation's, which adds every admitted Machine its keys do not list)
// adds no host whose store status shows work of ours under way. Released,
// the host is never powered on.
func TestReview40ao_RestartWithFencedHostUnlistedLeavesItOff(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "other", Online: true})
	cl, tk := fence40ao(t, store, hw)
	otherHW := fake.NewPower(time.Now, fake.PowerConfig{})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power: func(name string) (power.Controller, error) {
			if name == "other" {
				return otherHW, nil
			}
			return hw, nil
		},
		Config: fastCfg40ao}
	l := rec.Loop(func(context.Context) ([]string, error) { return []string{"other"}, nil })
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cl.Release(ctx, tk))
	deadline := time.Now().Add(5 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(),
		"a fenced host dropped from the listing while the controller restarted is still off 5 s after its release: nothing reconciles it")
}

// TestReview40ao_UnlistedOnlineFalseHostWithDeadBMCNeverForgotten: the
// operator powers a host off for good (Online=false, metal3's way) and
// takes it out of the inventory; later its BMC dies (unplugged). busy.go
// calls every Online=false host busy ("Online=false enforced") whatever
// else, so the Runner keeps the key for ever: the decommissioned host's
// dead BMC is read every few hundred ms for the life of the process, and
// every host so retired adds a key (round 35/36's liveness finding, back
// for the commonest way to retire a host).
func TestReview40ao_UnlistedOnlineFalseHostWithDeadBMCNeverForgotten(t *testing.T) {
	var dead atomic.Bool
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	// LostLanding and SoftTimeout short: a Reconciler keeps every host
	// busy for LostLanding + 2x SoftTimeout + StaleReads after its start
	// (another process's lost call may land: othersMayLand); the host is
	// let go after that.
	cfg := fastCfg40ao
	cfg.SoftTimeout, cfg.LostLanding = 200*time.Millisecond, 200*time.Millisecond
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: cfg}
	var dropped atomic.Bool
	var passes atomic.Int32
	l := rb.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{}, nil
		}
		return []string{"h"}, nil
	})
	inner := l.Reconcile
	l.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		passes.Add(1)
		return inner(ctx, k)
	}
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Loops: []reboot.Loop{l}})
	require.Eventually(t, func() bool { return !hw.HardwareOn() }, 10*time.Second, 5*time.Millisecond, "setup: Online=false powers it off")
	time.Sleep(500 * time.Millisecond) // settled off
	dead.Store(true)
	dropped.Store(true)
	time.Sleep(time.Second) // ten Resync ticks
	before, calls := passes.Load(), len(hw.Calls())
	time.Sleep(time.Second)
	require.Equal(t, before, passes.Load(),
		"a powered-off (Online=false) host with a dead BMC, out of the listing for 2 s, is still reconciled (its dead BMC called %d times more in 1 s)",
		len(hw.Calls())-calls)
	require.ErrorIs(t, stop(), context.Canceled)
}

// guard40ao is a leadership fence that refuses (standby) until lead is set.
type guard40ao struct{ lead atomic.Bool }

func (g *guard40ao) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if !g.lead.Load() {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	return c, cancel, nil
}

// TestReview40ao_StandbyForgetsFencedHostDroppedBeforeItLeads: a second
// process runs as standby (its Guard refuses) while the first fences a
// host; the host is dropped from the listing; the first process dies and
// the standby takes the leadership. If the standby's passes for the host
// never succeeded (a pass that would write fails with ErrNotLeader), its
// key was never busy and was forgotten: the new leader never powers the
// released host on.
func TestReview40ao_StandbyForgetsFencedHostDroppedBeforeItLeads(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	cl, tk := fence40ao(t, store, hw)
	g := &guard40ao{}
	var passes, fails atomic.Int32
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now, Guard: g,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: fastCfg40ao}
	var dropped atomic.Bool
	l := rec.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{}, nil
		}
		return []string{"h"}, nil
	})
	inner := l.Reconcile
	l.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		passes.Add(1)
		n, err := inner(ctx, k)
		if err != nil {
			fails.Add(1)
			t.Logf("standby pass: %v", err)
		}
		return n, err
	}
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}})
	defer stop()
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	time.Sleep(150 * time.Millisecond)
	dropped.Store(true)
	time.Sleep(400 * time.Millisecond)
	g.lead.Store(true) // the first process is gone: this one leads
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.Release(ctx, tk))
	deadline := time.Now().Add(8 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(),
		"a fenced host dropped from the listing while this process was standby is still off 8 s after its release (standby passes %d, failed %d)",
		passes.Load(), fails.Load())
}
