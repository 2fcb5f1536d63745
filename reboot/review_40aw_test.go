package reboot_test

import (
	"context"
	"errors"
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

// setup40aw is setup40av's record (host h Online=false, known off, with a
// power-on decided before Online=false and never confirmed, written by a
// first controller) in a store that also holds a second, healthy host o
// (Online, running), which stays in the inventory.
func setup40aw(t *testing.T) (*fake.Clock, *fake.Power, *fake.Power, *fake.RebootHosts) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, SoftDelay: 10 * time.Second})
	pwO := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOn})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "o", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	for i := 0; ; i++ {
		require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if res.Decision.Power == reboot.ActionPowerOn {
			break
		}
		clk.Advance(time.Second)
	}
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, clk.Real().Add(10*time.Minute), start)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, !pw.HardwareOn() && !h.Status.OfflineSince.IsZero() && !h.Status.OfflineOffSeen.IsZero() &&
		!h.Status.OnConfirmed.Equal(h.Status.LastPoweredOn),
		"setup: Online=false enforced, known off, power-on unconfirmed; %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	return clk, pw, pwO, store
}

// runKeys40aw drives l as the Runner does, tick by tick (1 s) until end:
// every key the listing holds, or whose last pass reported busy, gets a
// pass. busy carries the Runner's busy keys across calls. at, if not nil,
// is called before every tick.
func runKeys40aw(t *testing.T, l reboot.Loop, clk *fake.Clock, end time.Time, busy map[string]bool, at func()) (heldH bool) {
	t.Helper()
	ctx := context.Background()
	for clk.Real().Before(end) {
		if at != nil {
			at()
		}
		keys, err := l.Keys(ctx)
		require.NoError(t, err)
		held := slices.Clone(keys)
		for k, b := range busy {
			if b && !slices.Contains(held, k) {
				held = append(held, k)
			}
		}
		slices.Sort(held)
		heldH = slices.Contains(held, "h")
		for _, k := range held {
			n, err := l.Reconcile(ctx, k)
			if err == nil || n.Busy || n.Idle {
				busy[k] = n.Busy
			}
		}
		clk.Advance(time.Second)
	}
	return heldH
}

// standbyThenLead40aw: a second process stands by (its Guard refuses)
// while h, dropped from the inventory, shows the unconfirmed power-on;
// the first process dies and this one leads; the first process's power-on
// (its sender's lease ended when this one began to lead) lands a minute
// after the leadership began, within LostLanding (3 min) of it: the
// window onread.go's readOn and quiet.go's lead promise (heard.onLands).
// hFails: h's power controller cannot be had while this process stands
// by (healed when it leads).
func standbyThenLead40aw(t *testing.T, hFails bool, inventory []string) (landed bool, heldH bool, st reboot.Status, pw *fake.Power) {
	ctx := context.Background()
	clk, pw, pwO, store := setup40aw(t)
	g := &guard40ao{}
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(), Guard: g,
		Power: func(name string) (power.Controller, error) {
			if name == "o" {
				return pwO, nil
			}
			if hFails && !g.lead.Load() {
				return nil, errors.New("no BMC credentials on this node yet")
			}
			return pw, nil
		}}
	l := rec2.Loop(func(context.Context) ([]string, error) { return slices.Clone(inventory), nil })
	busy := map[string]bool{}
	runKeys40aw(t, l, clk, clk.Real().Add(10*time.Minute), busy, nil)
	// The first process is gone: this one leads from its next probe (o's
	// pass, at once); the first's power-on lands 60 s later.
	g.lead.Store(true)
	leadAt := clk.Real()
	var on atomic.Bool
	heldH = runKeys40aw(t, l, clk, leadAt.Add(30*time.Minute), busy, func() {
		if !on.Load() && clk.Real().Sub(leadAt) >= 60*time.Second {
			on.Store(true)
			require.NoError(t, pw.On(ctx))
		}
	})
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Online, "setup: h still Online=false")
	return landed40au(pw, leadAt), heldH, h.Status, pw
}

// TestReview40aw_EarlyNoteStandbyLeadsLostPowerOnLandsUnwatched: d7033fb
// notes a power-on read by a pass that failed before deciding (no power
// controller) or by a listing, for a host with no memory, in
// Reconciler.early (onread.go readEarly), which ignores whether this
// Reconciler stands by: readOn's rule "one first read while standing by
// counts again when the leadership begins (heard.onLands, lead)" is kept
// only in a memory, and noteHold (reconciler.go lead loop) walks r.hosts
// alone, never r.early. So a standby whose power controller for h could
// not be had (credentials not yet on its node) notes the unconfirmed
// power-on early, forgets h LostLanding later, and when it begins to
// lead (the old leader gone: its power-on may land LostLanding after
// that) h is not re-noted: the HostLister's listBusy reads knows=true
// (early), lands=false, and does not list it. The old leader's power-on
// lands a minute after the leadership began: the host runs under
// Online=false for good, its controller healthy, nobody watching. The
// same standby with a power controller all along (a memory: heard.onLands)
// holds h and powers it off (TestReview40aw_StandbyWithMemoryLeadsLostPowerOnPoweredOff).
func TestReview40aw_EarlyNoteStandbyLeadsLostPowerOnLandsUnwatched(t *testing.T) {
	landed, heldH, st, pw := standbyThenLead40aw(t, true, []string{"o"})
	require.True(t, landed, "setup: the old leader's power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(),
		"an Online=false host whose old leader's power-on landed 60 s after this standby began to lead (within LostLanding) runs under Online=false 30 min later, power controller healthy since the lead, never reconciled (held at end %v; status %+v; truth %s)",
		heldH, st, rebootcheck.DescribeTruth(pw))
}

// TestReview40aw_StandbyWithMemoryLeadsLostPowerOnPoweredOff (passing,
// control for the test above): the standby whose passes of h decide (a
// memory, heard.onLands) re-notes the power-on when it leads, lists h
// and powers it off once it lands.
func TestReview40aw_StandbyWithMemoryLeadsLostPowerOnPoweredOff(t *testing.T) {
	landed, heldH, st, pw := standbyThenLead40aw(t, false, []string{"o"})
	require.True(t, landed, "setup: the old leader's power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(), "control: still on 30 min later (held %v; status %+v; truth %s)", heldH, st, rebootcheck.DescribeTruth(pw))
}

// TestReview40aw_StandbyWithNoOtherKeyNeverLearnsItLeads: the leadership
// is learnt only by a pass's probe (reconciler.go Reconcile: r.probe, and
// the Holds of its writes and calls); lead, which re-notes a power-on
// first read while standing by (heard.onLands: "it may land LostLanding
// after the leadership begins"), runs only from noteHold. A standby whose
// inventory holds no other key (the HostLister alone lists h while its
// record shows work) runs no pass once h is forgotten: when it begins to
// lead, nothing notices, h is not re-noted, the HostLister's listBusy
// reads knows=true, callsMayLand false, and does not list it. The old
// leader's power-on lands 60 s after the leadership began (within
// LostLanding): the host runs under Online=false for good, healthy BMC,
// nobody watching. With another key in the inventory (the control
// TestReview40aw_StandbyWithMemoryLeadsLostPowerOnPoweredOff) the same
// host is powered off.
func TestReview40aw_StandbyWithNoOtherKeyNeverLearnsItLeads(t *testing.T) {
	landed, heldH, st, pw := standbyThenLead40aw(t, false, nil)
	require.True(t, landed, "setup: the old leader's power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(),
		"an Online=false host whose old leader's power-on landed 60 s after this standby began to lead (within LostLanding) runs under Online=false 30 min later, healthy BMC, never reconciled (held at end %v; status %+v; truth %s)",
		heldH, st, rebootcheck.DescribeTruth(pw))
}
