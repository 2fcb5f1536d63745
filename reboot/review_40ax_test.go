package reboot_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40ax_LostLeaseNeverProbedNotesStandbyReadAsLeader: round 45
// (974b6de) counts a power-on first read while standing by again from
// when the leadership begins (heard.onLands / earlyOn.standby, lead,
// leadEarly), and learns the leadership from a probe. But "standing by"
// is r.leading as the last probe left it, and a pass whose power
// controller cannot be had fails before its probe (reconciler.go
// Reconcile: r.Power before r.probe; failedBusy -> readEarly), while a
// listing probes only when awaitsLead, which is false as long as
// r.leading is true. So a process that led, then lost its lease while
// its power controllers could not be had (its credentials source is down
// with the partition), never learns it stands by: it reads the new
// leader's unconfirmed power-on as a leader would (standby false),
// counts LostLanding from that read, and when the new leader dies and it
// leads again, noteHold sees r.leading already true and re-counts
// nothing. The new leader's power-on (its lease ended when this process
// leads again) lands 60 s later, within LostLanding (3 min) of the
// leadership's beginning -- the window doc.go and readOn promise: the
// host runs under Online=false for good, its BMC healthy, unwatched.
func TestReview40ax_LostLeaseNeverProbedNotesStandbyReadAsLeader(t *testing.T) {
	lostLease40ax(t, false)
}

// TestReview40ax_LostLeaseListingReadsStandbyAsLeader: the same lease
// loss with no fault at all but an inventory that holds no key (every
// host dropped from it; the HostLister alone lists what shows work): no
// pass runs after the loss, so nothing probes (awaitsLead is false while
// r.leading), and the listing that first reads B's unconfirmed power-on
// notes it as a leader's read (hostlister.go listBusy -> readEarly:
// standby from the stale r.leading). A pass of h that follows may probe
// and learn it stands by, but readOn notes a value once: heard.onLands is
// never set, and the leadership's beginning re-counts nothing. B's
// power-on lands 60 s after this process leads again: h runs under
// Online=false, unwatched.
func TestReview40ax_LostLeaseListingReadsStandbyAsLeader(t *testing.T) {
	lostLeaseInv40ax(t, false, false, nil)
}

// TestReview40ax_LostLeaseProbedByOtherPassPoweredOff (passing, control
// for the test above): the same partition where only h's power controller
// cannot be had: o's passes probe, the process learns it stands by, reads
// B's power-on standing by, re-counts it when it leads, and powers h off
// once it lands.
func TestReview40ax_LostLeaseProbedByOtherPassPoweredOff(t *testing.T) {
	lostLease40ax(t, true)
}

// lostLease40ax: onlyH: during the partition only h's power controller
// cannot be had (o's passes still probe the Guard).
func lostLease40ax(t *testing.T, onlyH bool) {
	lostLeaseInv40ax(t, onlyH, true, []string{"o"})
}

func lostLeaseInv40ax(t *testing.T, onlyH, fail bool, inventory []string) {
	ctx := context.Background()
	clk, pw, pwO, store := setup40aw(t)
	g := &guard40ao{}
	g.lead.Store(true)
	var down atomic.Bool
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(), Guard: g,
		Power: func(name string) (power.Controller, error) {
			if down.Load() && (!onlyH || name == "h") {
				return nil, errors.New("credentials source unreachable")
			}
			if name == "o" {
				return pwO, nil
			}
			return pw, nil
		}}
	l := rec2.Loop(func(context.Context) ([]string, error) { return slices.Clone(inventory), nil })
	busy := map[string]bool{}
	// This process leads for 10 minutes: the first controller's power-on
	// is noted, expires, h is forgotten, off.
	runKeys40aw(t, l, clk, clk.Real().Add(10*time.Minute), busy, nil)
	require.False(t, pw.HardwareOn(), "setup: h off; truth %s", rebootcheck.DescribeTruth(pw))
	// A partition: this process loses its lease (another process B leads)
	// and cannot get its power controllers meanwhile.
	g.lead.Store(false)
	down.Store(fail)
	t1 := clk.Real()
	// B sends h a power-on (decided under a short Online=true, Online is
	// false again) that does not land yet: its record shows it unconfirmed.
	var bWrote atomic.Bool
	runKeys40aw(t, l, clk, t1.Add(5*time.Minute), busy, func() {
		if !bWrote.Load() && clk.Real().Sub(t1) >= 30*time.Second {
			bWrote.Store(true)
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Status.LastPoweredOn = clk.Now().Truncate(time.Second)
			}))
		}
	})
	// B dies; the partition heals: this process leads again, its power
	// controllers back. B's power-on lands 60 s after that.
	g.lead.Store(true)
	down.Store(false)
	leadAt := clk.Real()
	var on atomic.Bool
	heldH := runKeys40aw(t, l, clk, leadAt.Add(30*time.Minute), busy, func() {
		if !on.Load() && clk.Real().Sub(leadAt) >= 60*time.Second {
			on.Store(true)
			require.NoError(t, pw.On(ctx))
		}
	})
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Online, "setup: h still Online=false")
	require.True(t, landed40au(pw, leadAt), "setup: B's power-on landed; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(),
		"an Online=false host whose standing-by-era power-on (read while this process wrongly believed it led: no probe since its lease was lost) landed 60 s after it led again runs under Online=false 30 min later, BMC healthy, unwatched (held at end %v; status %+v; truth %s)",
		heldH, h.Status, rebootcheck.DescribeTruth(pw))
}
