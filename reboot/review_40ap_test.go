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

// TestReview40ap_OnlineTrueAgainWhileBMCUnreadableLeftOffForGood: an
// operator powers a host off (Online=false) and takes it out of the
// inventory; the controller forgets it once its power-off is known done
// (idle, documented). Later the operator puts it back on (Online=true).
// The store is a HostLister (fake.RebootHosts): its stored status (Online
// with OfflineSince set: "an Online=false enforcement that ended") shows
// work under way, so Reconciler.Loop adds it back. But its BMC is
// unreadable at that moment: the pass cannot power it on ("power state
// unknown: wait"), yet idle() clears OfflineSince in the status it
// writes at once (decide_phases.go:353), so busy() says not busy, the
// Runner forgets the key at the next tick, and the stored record no
// longer shows anything for the HostLister. When the BMC answers again
// nothing reconciles the host: it stays off for good, against the fake
// hardware's truth (safety: no host left off for good; the brief's
// "Online=false being enforced" power-on).
func TestReview40ap_OnlineTrueAgainWhileBMCUnreadableLeftOffForGood(t *testing.T) {
	var dead atomic.Bool
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false}, reboot.Host{Name: "other", Online: true})
	otherHW := fake.NewPower(time.Now, fake.PowerConfig{})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power: func(name string) (power.Controller, error) {
			if name == "other" {
				return otherHW, nil
			}
			return hw, nil
		},
		Config: fastCfg40ao}
	var dropped atomic.Bool
	var passes atomic.Int32
	l := rec.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{"other"}, nil
		}
		return []string{"h", "other"}, nil
	})
	inner := l.Reconcile
	l.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		if k == "h" {
			passes.Add(1)
		}
		return inner(ctx, k)
	}
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		h, err := store.Get(ctx, "h")
		return err == nil && !hw.HardwareOn() && !h.Status.OfflineOffSeen.IsZero()
	}, 10*time.Second, 5*time.Millisecond, "setup: Online=false powers it off, known done")
	dropped.Store(true)                // out of the inventory, powered off
	time.Sleep(500 * time.Millisecond) // forgotten: idle (documented)

	dead.Store(true) // its BMC does not answer for a moment
	before := passes.Load()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true })) // back on, please
	require.Eventually(t, func() bool { return passes.Load() > before }, 5*time.Second, 5*time.Millisecond,
		"setup: the HostLister adds the host back (Online with OfflineSince set)")
	time.Sleep(time.Second) // ten Resync ticks with the BMC unreadable
	dead.Store(false)       // the BMC answers again
	deadline := time.Now().Add(5 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, hw.HardwareOn(),
		"a host set Online=true again (after an Online=false power-off) while its BMC was unreadable is still off 5 s after its BMC answers again (passes %d; stored OfflineSince %v, LastPoweredOn %v): the pass that could not power it on cleared OfflineSince and the Runner forgot it",
		passes.Load(), h.Status.OfflineSince, h.Status.LastPoweredOn)
}

// TestReview40ap_HeldKeyForgottenWhenOnlineTrueMeetsUnreadableBMC: the
// same without a restart or a forgotten key: an Online=false host, known
// off, is kept by the Runner (listed). The operator sets it Online=true
// and, in the same change, takes it out of the inventory (it is handed
// back); its BMC is unreadable for a moment. The pass that sees
// Online=true cannot power it on but clears OfflineSince in the status
// it writes (decide_phases.go:353) and reports not busy (busy.go:50
// reads the decided status): the Runner forgets the key at the next
// tick, and the host stays off for good once its BMC answers.
func TestReview40ap_HeldKeyForgottenWhenOnlineTrueMeetsUnreadableBMC(t *testing.T) {
	var dead atomic.Bool
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: fastCfg40ao}
	var dropped atomic.Bool
	var passes atomic.Int32
	l := rec.Loop(func(context.Context) ([]string, error) {
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
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		h, err := store.Get(ctx, "h")
		return err == nil && !hw.HardwareOn() && !h.Status.OfflineOffSeen.IsZero()
	}, 10*time.Second, 5*time.Millisecond, "setup: Online=false powers it off, known done")
	dead.Store(true)
	before := passes.Load()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	dropped.Store(true)
	require.Eventually(t, func() bool { return passes.Load() > before }, 5*time.Second, time.Millisecond, "setup: a pass sees Online=true")
	time.Sleep(time.Second)
	dead.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(),
		"a held Online=false host set Online=true and unlisted while its BMC was unreadable is still off 5 s after its BMC answers again (passes %d)",
		passes.Load())
}

// TestReview40ap_FenceReleasedWhileBMCUnreadableUnlisted: a host is
// fenced (held off by a keyed request) and dropped from the listing
// (kept: busy). Its BMC stops answering; the fencer releases. Whatever
// the pass decides while the BMC is unreadable, the host must be
// powered on once it answers again.
func TestReview40ap_FenceReleasedWhileBMCUnreadableUnlisted(t *testing.T) {
	var dead atomic.Bool
	hw := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: fastCfg40ao}
	var dropped atomic.Bool
	var passes atomic.Int32
	l := rec.Loop(func(context.Context) ([]string, error) {
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
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	dropped.Store(true)
	time.Sleep(300 * time.Millisecond)
	dead.Store(true)
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cl.Release(ctx, tk))
	time.Sleep(2 * time.Second)
	dead.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(), "a fenced unlisted host released while its BMC was unreadable is still off 5 s after it answers (passes %d)", passes.Load())
}

// failingLister40ap is fake.RebootHosts whose List (HostLister) always
// fails: a store whose "every record" query times out or is not
// permitted, while Get and Update by key work.
type failingLister40ap struct{ *fake.RebootHosts }

func (failingLister40ap) List(context.Context) ([]reboot.Host, error) {
	return nil, errors.New("SELECT * FROM hosts: statement timeout")
}

// TestReview40ap_FailingHostListerStallsListedHosts: the HostLister is an
// optional extension that only adds hosts; but withBusy fails the whole
// listing when List fails (hostlister.go:35), so a store whose List fails
// for ever gets no key reconciled at all: a host keys lists, asked to be
// fenced, is never powered off (the fencer waits for ever). The keys the
// user's own listing returns are known; the extra ones cannot be, and
// only they should be missing.
func TestReview40ap_FailingHostListerStallsListedHosts(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := failingLister40ap{fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: fastCfg40ao}
	l := rec.Loop(func(context.Context) ([]string, error) { return []string{"h"}, nil })
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	require.NoError(t, cl.WaitFenced(wctx, tk),
		"a listed host is never fenced because the store's optional List (HostLister) fails")
	require.True(t, hw.WasOffDuring(tk.At, time.Now()))
}

// TestReview40ap_RestartOnlineTrueAgainUnlistedLeftOff: no BMC fault at
// all. A first controller process powers a host off for Online=false
// (known done) and stops (a restart, an upgrade). Meanwhile the operator
// hands the host back: Online=true, and out of the inventory's listing.
// The second process's HostLister (fake.RebootHosts) finds it (Online
// with OfflineSince set shows work under way) and passes it at once. A
// restarted Reconciler counts the host as possibly powered on at its
// start, so for StaleReads its Off reading may be an echo: the pass
// waits ("off reading may be stale"), but idle() already cleared
// OfflineSince in the status it writes (decide_phases.go:353), so the
// pass reports not busy (busy.go:50 reads the decided status) and the
// stored record no longer shows the power-on owed. The Runner forgets
// the key at the next Resync tick, the HostLister no longer lists it,
// and the host stays off for good with a healthy BMC (fake hardware's
// truth).
func TestReview40ap_RestartOnlineTrueAgainUnlistedLeftOff(t *testing.T) {
	cfg := fastCfg40ao
	cfg.StaleReads = time.Second
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false}, reboot.Host{Name: "other", Online: true})
	otherHW := fake.NewPower(time.Now, fake.PowerConfig{})
	pw := func(name string) (power.Controller, error) {
		if name == "other" {
			return otherHW, nil
		}
		return hw, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	{ // the first process
		rec := &reboot.Reconciler{Hosts: store, Now: time.Now, Power: pw, Config: cfg}
		l := rec.Loop(func(context.Context) ([]string, error) { return []string{"h", "other"}, nil })
		stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
			Loops: []reboot.Loop{l}})
		require.Eventually(t, func() bool {
			h, err := store.Get(ctx, "h")
			return err == nil && !hw.HardwareOn() && !h.Status.OfflineOffSeen.IsZero()
		}, 20*time.Second, 5*time.Millisecond, "setup: Online=false powers it off, known done")
		require.ErrorIs(t, stop(), context.Canceled)
	}
	// While no controller runs: handed back, and out of the listing.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))

	rec := &reboot.Reconciler{Hosts: store, Now: time.Now, Power: pw, Config: cfg}
	var passes atomic.Int32
	l := rec.Loop(func(context.Context) ([]string, error) { return []string{"other"}, nil })
	inner := l.Reconcile
	l.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		n, err := inner(ctx, k)
		if k == "h" {
			passes.Add(1)
			t.Logf("pass h: busy=%v after=%v err=%v", n.Busy, n.After, err)
		}
		return n, err
	}
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	defer stop()
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 5*time.Second, time.Millisecond, "setup: the HostLister adds the host")
	deadline := time.Now().Add(6 * time.Second) // StaleReads is 1 s
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, hw.HardwareOn(),
		"a host handed back (Online=true) while the controller restarted is still off 6 s after the new process's first pass (passes %d; stored OfflineSince %v): the pass that waited out StaleReads cleared OfflineSince and the Runner forgot it",
		passes.Load(), h.Status.OfflineSince)
}

// TestReview40ap_DeprovisionedUnconfirmedHostPolledForEver: a host is
// rebooted (a fencer's request, released: the power-on goes out) and
// deprovisioned (retired) and taken out of the inventory before a fresh
// On reading confirmed the power-on (Status.OnConfirmed), with its BMC
// healthy. deprovision() decides nothing of power and never confirms a
// power-on (only idle() sets OnConfirmed), yet busy() and storedBusy()
// read the unconfirmed LastPoweredOn (busy.go:52) even for a
// Deprovisioned host: its key is busy for good, and the HostLister
// (fake.RebootHosts) adds it back at every listing: a retired host is
// passed every Resync for the life of the process (the issue: the
// runner must not poll for ever), and every process after a restart.
func TestReview40ap_DeprovisionedUnconfirmedHostPolledForEver(t *testing.T) {
	cfg := fastCfg40ao
	cfg.StaleReads = 2 * time.Second
	// LostLanding and SoftTimeout short: a Reconciler keeps every host
	// busy for LostLanding + 2x SoftTimeout + StaleReads after its start
	// (another process's lost call may land: othersMayLand); the host is
	// let go after that.
	cfg.SoftTimeout, cfg.LostLanding = 200*time.Millisecond, 200*time.Millisecond
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: cfg}
	var dropped atomic.Bool
	var passes atomic.Int32
	l := rec.Loop(func(context.Context) ([]string, error) {
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
	stop := runFor(t, &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{l}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	require.NoError(t, cl.Release(ctx, tk))
	require.Eventually(t, func() bool {
		h, err := store.Get(ctx, "h")
		return err == nil && hw.HardwareOn() && !h.Status.LastPoweredOn.IsZero() && h.Status.OnConfirmed.IsZero()
	}, 20*time.Second, time.Millisecond, "setup: powered on, not yet confirmed")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Deprovisioned = true })) // retired
	dropped.Store(true)
	time.Sleep(3 * time.Second) // StaleReads passed: nothing of ours may still change its power
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, hw.HardwareOn(), "setup: on")
	before := passes.Load()
	time.Sleep(time.Second)
	after := passes.Load()
	require.ErrorIs(t, stop(), context.Canceled)
	require.Equal(t, before, after,
		"a deprovisioned host out of the listing for 4 s (healthy BMC, on) is still passed: %d passes in the last 1 s (stored LastPoweredOn %v, OnConfirmed %v)",
		after-before, h.Status.LastPoweredOn, h.Status.OnConfirmed)
}
