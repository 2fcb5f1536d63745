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

// The shared worlds of the review 36 tests (review_36*_test.go,
// review36*_fix_test.go): one fake clock, one host record, one fake
// controller, and the Reconcilers a test starts on them.

// review36World is the fake clock, the Config and the store of host "h"
// (Online) that every review 36 world starts from; Power is the
// controller every Reconciler it makes is given.
type review36World struct {
	clk   *fake.Clock
	cfg   reboot.Config
	store *fake.RebootHosts
	// Power is what newRec's Reconcilers are given for "h"; set it before
	// the first newRec.
	Power power.Controller
	// Guard, if set, is every Reconciler's Guard.
	Guard reboot.Guard
}

// newReview36World returns a world at the zero time with the default
// Config and host "h", Online.
func newReview36World() *review36World {
	return &review36World{clk: fake.NewClock(time.Time{}), cfg: reboot.DefaultConfig(),
		store: fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
}

// newRec returns a new Reconciler (a started or restarted controller) on
// the world's store, clock, Config, Guard and Power.
func (w *review36World) newRec() *reboot.Reconciler {
	return &reboot.Reconciler{Hosts: w.store, Now: w.clk.Now, Monotonic: w.clk.Monotonic, Config: w.cfg, Guard: w.Guard,
		Power: func(string) (power.Controller, error) { return w.Power, nil }}
}

// review36PressOnlyInterrupted is the world of the "restart (or lease
// hiccup) every few minutes" tests: a host whose BMC only presses
// (fake.ButtonAll, OS 20 s, reads 5 s old), a controller that has run 10
// minutes, a first bare reboot carried out, a second one asked 5 minutes
// later whose first press the BMC answers 409 busy (not carried out). 10 s
// after that request and then every `every`, the controller restarts (a
// new Reconciler), or with hiccup one Hold of the same Reconciler is
// refused (hiccupGuard). It runs 30 minutes from the request and returns
// the controller, the request's and the end's times and the number of
// restarts (or refusals).
func review36PressOnlyInterrupted(t *testing.T, every time.Duration, hiccup bool) (pw *fake.Power, cfg reboot.Config, requestAt, end time.Time, restarts int) {
	t.Helper()
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw = fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	w.Power = pw
	g := &hiccupGuard{}
	if hiccup {
		w.Guard = g
	}
	rec := w.newRec()
	// The controller has run for long before the request.
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	// A first reboot, carried out: Status.LastPress is set from then on.
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ""}
	}))
	// A second bare reboot is asked 5 minutes later; 10 s after it (the
	// reboot pending, nothing pressed yet) the controller restarts, and
	// again every `every`.
	requestAt = first.Add(5 * time.Minute)
	restartAt := requestAt.Add(10 * time.Second)
	end = requestAt.Add(30 * time.Minute)
	requested := false
	for clk.Real().Before(end) {
		if !clk.Real().Before(restartAt) {
			if hiccup {
				// One Hold refused (the lease store's hiccup), for one
				// pass; the same process goes on leading.
				g.refuse = 1
			} else {
				rec = w.newRec()
			}
			restarts, restartAt = restarts+1, clk.Real().Add(every)
		}
		if !requested && !clk.Real().Before(requestAt) {
			requested = true
			require.True(t, pw.WasOffDuring(first, clk.Real()), "the setup: the first reboot was carried out; truth %s", rebootcheck.DescribeTruth(pw))
			// The BMC answers the first press 409 busy (not carried out):
			// the reboot is still pending at the restart.
			pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.Annotation: ""}
			}))
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(requestAt), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		next = min(next, 30*time.Second, max(restartAt.Sub(clk.Real()), time.Millisecond))
		if !requested { // a past requestAt bounds no step (it made them 1 ms long)
			next = min(next, max(requestAt.Sub(clk.Real()), time.Millisecond))
		}
		clk.Advance(max(next, time.Millisecond))
	}
	return pw, w.cfg, requestAt, end, restarts
}
