package reboot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// world is one host, its simulated hardware on real time, a store and a
// Reconciler on the wall clock that has been up for a while.
type world struct {
	ctx   context.Context
	clk   *fake.Clock
	pw    *fake.Power
	ctl   *rebootcheck.Probe
	store *fake.RebootHosts
	r     *reboot.Reconciler
}

func newWorld(t *testing.T, cfg fake.PowerConfig, h reboot.Host) *world {
	t.Helper()
	w := &world{ctx: context.Background(), clk: fake.NewClock(time.Time{})}
	w.pw = fake.NewPower(w.clk.Real, cfg)
	w.ctl = &rebootcheck.Probe{Controller: w.pw}
	h.Name = "h"
	w.store = fake.NewRebootHosts(h)
	w.r = w.reconciler()
	w.pass(t)
	w.clk.Advance(time.Minute) // up for longer than Config.StaleReads
	return w
}

func (w *world) reconciler() *reboot.Reconciler {
	return &reboot.Reconciler{Hosts: w.store, Now: w.clk.Now, Monotonic: w.clk.Monotonic,
		Power: func(string) (power.Controller, error) { return w.ctl, nil }}
}

func (w *world) pass(t *testing.T) reboot.Result {
	t.Helper()
	res, err := w.r.Reconcile(w.ctx, "h")
	require.NoError(t, err)
	return res
}

// follow runs passes as a controller would, each after the last one's
// requeue (at once after a failed power call), until stop says so or limit
// has passed; it reports whether stop did.
func (w *world) follow(t *testing.T, limit time.Duration, stop func() bool) bool {
	t.Helper()
	end := w.clk.Real().Add(limit)
	for w.clk.Real().Before(end) {
		res := w.pass(t)
		if stop() {
			return true
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Millisecond
		}
		w.clk.Advance(next)
	}
	return stop()
}

func (w *world) host(t *testing.T) reboot.Host {
	t.Helper()
	h, err := w.store.Get(w.ctx, "h")
	require.NoError(t, err)
	return h
}

// Issue 11, case 1: a client whose T has sub-second precision, in the same
// second as the first off observation, is fenced within one requeue, and a
// long hold costs no status write per pass. (The old code stored the first
// off observation truncated to the second, below T, forever.)
func TestRegressionSubSecondClientTimeIsFenced(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{}, reboot.Host{Online: true})
	w.clk.Advance(600 * time.Millisecond)
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	tk, err := client.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NotZero(t, tk.At.Nanosecond(), "T has sub-second precision")

	res := w.pass(t) // power-off (hard, no lag): off at once
	assert.Equal(t, reboot.ActionPowerOff, res.Decision.Power)
	fenced := func() bool {
		f, err := client.Fenced(w.ctx, tk)
		require.NoError(t, err)
		return f
	}
	require.True(t, w.follow(t, time.Minute, fenced))
	// The first Off reading that cannot predate the request comes
	// StaleReads (30 s) after it; evidence in T's own second cannot vouch
	// for T, the next second's does.
	took := w.clk.Real().Sub(tk.At)
	assert.GreaterOrEqual(t, took, 30*time.Second)
	assert.LessOrEqual(t, took, 32*time.Second, "fenced within a second of StaleReads")
	assert.True(t, w.pw.WasOffDuring(tk.At, w.clk.Real()), "ground truth agrees")

	before := w.store.Updates()
	for i := 0; i < 50; i++ {
		w.clk.Advance(5 * time.Second)
		w.pass(t)
	}
	assert.Equal(t, before, w.store.Updates(), "a held host costs no write per pass")
}

// Issue 11, case 2: right after an accepted power-on, a BMC that still
// reports Off for seconds must not produce fencing evidence, nor satisfy a
// new request. (The old code recorded such a reading as LastPoweredOff, so
// Fenced answered yes for a running host.)
func TestRegressionStaleOffAfterPowerOnIsNotEvidence(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{Report: fake.Report{Stale: 10 * time.Second, NoTransitioning: true}},
		reboot.Host{Online: true})
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	// A first fencing round: off, fenced, released, powered on.
	tk, err := client.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for i := 0; i < 60; i++ {
		w.pass(t)
		if f, _ := client.Fenced(w.ctx, tk); f {
			break
		}
		w.clk.Advance(time.Second)
	}
	require.NoError(t, client.Release(w.ctx, tk))
	var res reboot.Result
	for i := 0; i < 5 && res.Decision.Power != reboot.ActionPowerOn; i++ {
		w.clk.Advance(time.Second)
		res = w.pass(t)
	}
	require.Equal(t, reboot.ActionPowerOn, res.Decision.Power)
	require.True(t, w.pw.HardwareOn())

	// A second fencing request right after the power-on: the BMC still says
	// Off for 10 s. Until the hardware is really off again, no answer may
	// say fenced, and the evidence must not move.
	w.clk.Advance(1500 * time.Millisecond)
	tk2, err := client.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	evidence := w.host(t).Status.LastPoweredOff
	for i := 0; i < 40; i++ {
		w.clk.Advance(250 * time.Millisecond)
		w.pass(t)
		f, err := client.Fenced(w.ctx, tk2)
		require.NoError(t, err)
		if f {
			require.True(t, w.pw.WasOffDuring(tk2.At, w.clk.Real()), "fenced while the hardware ran since T (pass %d)", i)
		}
		if w.pw.WasOnAt(w.clk.Real()) && w.pw.WasOffDuring(w.clk.Real().Add(-time.Second), w.clk.Real()) == false {
			assert.Equal(t, evidence, w.host(t).Status.LastPoweredOff, "evidence moved on a stale reading (pass %d)", i)
		}
	}

	// The decision alone: an Off reading 5 s after a power-on is neither
	// evidence nor a reason to remove the bare annotation.
	d := reboot.Decide(reboot.Observed{
		Annotations: map[string]string{reboot.Annotation: ""}, Online: true, Power: power.StateOff,
		QuietFor: 5 * time.Second,
		Status:   reboot.Status{PendingRebootSince: fake.Epoch, LastRequestSeen: fake.Epoch, Seen: []string{}},
	}, fake.Epoch.Add(time.Minute))
	assert.Empty(t, d.RemoveAnnotations)
	assert.True(t, d.Status.LastPoweredOff.IsZero())
	assert.NotEqual(t, reboot.ActionPowerOn, d.Power)
}

// Issue 11, case 3: a clock that jumps forward a year while the controller
// powers a host on, and is corrected. Fenced must not answer yes for the
// running host, the stored timestamps are repaired with a warning, and the
// next reboot's power-on does not wait a year.
func TestRegressionClockCorrection(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{}, reboot.Host{Online: true})
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	w.clk.Jump(365 * 24 * time.Hour) // NTP misconfigured
	tk, err := client.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	w.pass(t) // off
	w.clk.Advance(31 * time.Second)
	w.pass(t) // evidence, stamped a year ahead
	require.NoError(t, client.Release(w.ctx, tk))
	w.clk.Advance(2 * time.Second)
	res := w.pass(t)
	require.Equal(t, reboot.ActionPowerOn, res.Decision.Power)
	h := w.host(t)
	require.True(t, h.Status.LastPoweredOn.After(w.clk.Real().Add(300*24*time.Hour)), "stamped by the fast clock")

	w.clk.Correct()
	w.clk.Advance(10 * time.Second)
	require.True(t, w.pw.HardwareOn())
	// A third party asks about a T after the power-on: the stored evidence
	// is a year ahead, and must not be vouched for.
	tNow := w.clk.Now()
	h = w.host(t)
	assert.False(t, h.Status.Fenced(tNow.Add(-time.Second), tNow), "fenced a running host on a timestamp from a fast clock")
	res = w.pass(t)
	var warned bool
	for _, e := range res.Decision.Warnings {
		warned = warned || errors.Is(e, reboot.ErrFutureTimestamp)
	}
	assert.True(t, warned, "the repair is reported: %v", res.Decision.Warnings)
	h = w.host(t)
	assert.False(t, h.Status.LastPoweredOn.After(w.clk.Now()), "repaired")

	// The next reboot completes in seconds, not a year.
	tk, err = client.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for i := 0; i < 30; i++ {
		w.clk.Advance(2 * time.Second)
		w.pass(t)
		if f, _ := client.Fenced(w.ctx, tk); f {
			break
		}
	}
	require.NoError(t, client.Release(w.ctx, tk))
	for i := 0; i < 10; i++ {
		w.clk.Advance(2 * time.Second)
		w.pass(t)
	}
	done, err := client.Done(w.ctx, tk)
	require.NoError(t, err)
	assert.True(t, done, "the next reboot completed within a minute")
	assert.True(t, w.pw.HardwareOn())
}

// Issue 11, case 4: a pass whose power read is unknown (null, missing,
// Paused) never powers on: on some BMCs power calls toggle, which could
// power on a fenced host. (Issue 24 lets it send a power-off: a
// Controller never powers a host on for Off, see power.Controller.)
func TestRegressionUnknownPowerMakesNoCall(t *testing.T) {
	for _, o := range []reboot.Observed{
		{Annotations: map[string]string{"reboot.metal3.io/f": `{"mode":"soft"}`}, Online: true, Power: power.StateUnknown, QuietFor: time.Hour},
		{Annotations: map[string]string{"reboot.metal3.io/f": `{"mode":"hard"}`}, Online: true, Power: power.StateUnknown, QuietFor: time.Hour,
			Status: reboot.Status{PendingRebootSince: fake.Epoch, LastRequestSeen: fake.Epoch}},
		{Online: true, Power: power.StateUnknown, QuietFor: time.Hour},
		{Online: false, Power: power.StateUnknown, QuietFor: time.Hour},
	} {
		d := reboot.Decide(o, fake.Epoch.Add(10*time.Minute))
		assert.NotEqual(t, reboot.ActionPowerOn, d.Power, "%+v: %s", o, d.Reason)
		assert.Positive(t, d.RequeueAfter)
	}
	w := newWorld(t, fake.PowerConfig{Report: fake.Report{Unknown: 1}}, reboot.Host{Online: true})
	_, err := (&reboot.Client{Hosts: w.store, Key: "f", Now: w.clk.Now}).Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	calls := len(w.pw.Calls())
	for i := 0; i < 10; i++ {
		w.clk.Advance(5 * time.Second)
		w.pass(t)
	}
	for _, c := range w.pw.Calls()[calls:] {
		assert.NotEqual(t, fake.OpOn, c.Op, "a power-on while the state is unknown")
	}
}

// Issue 11, case 5: with Online=false, the soft-to-hard fallback survives
// restarts. (The old code timed it from the in-memory last call, so a
// controller restarted every 150 s never fell back and the host stayed on.)
func TestRegressionOnlineFalseFallbackSurvivesRestarts(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{IgnoreSoft: true}, reboot.Host{Online: true})
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	for i := 0; i < 100 && w.pw.HardwareOn(); i++ {
		if i%30 == 0 {
			w.r = w.reconciler() // restarted every 150 s
		}
		w.pass(t)
		w.clk.Advance(5 * time.Second)
	}
	assert.False(t, w.pw.HardwareOn(), "the host is still on: no fallback to hard")
	var hard bool
	for _, c := range w.pw.Calls() {
		hard = hard || c.Op == fake.OpOff && c.Mode == power.ModeHard
	}
	assert.True(t, hard)
}

// Issue 11, case 6: reboot.metal3.io/ (an empty key) never holds a host,
// even under a Policy that allows only the bare annotation, and its warning
// says why. (The old code gave it policy key "", the bare key, and held the
// host off for good.)
func TestRegressionEmptyKeyNeverHolds(t *testing.T) {
	cfg := reboot.Config{Policy: reboot.Policy{Allowed: reboot.Keys("")}}
	o := reboot.Observed{
		Annotations: map[string]string{reboot.Annotation: "", reboot.AnnotationPrefix: `{"mode":"hard"}`},
		Online:      true, Power: power.StateOn, QuietFor: time.Hour,
	}
	o.Status = cfg.Decide(o, fake.Epoch).Status // the request is seen
	o.Power = power.StateOff
	o.SincePending, o.SinceRequest = time.Minute, time.Minute
	d := cfg.Decide(o, fake.Epoch.Add(time.Minute))
	assert.Equal(t, reboot.ActionPowerOn, d.Power, "held by an invalid key: %s", d.Reason)
	require.Len(t, d.Warnings, 1)
	assert.ErrorIs(t, d.Warnings[0], reboot.ErrInvalidKey)
	assert.Contains(t, d.Warnings[0].Error(), "does not reboot or hold the host")
	assert.True(t, strings.Contains(d.Warnings[0].Error(), reboot.AnnotationPrefix))
}

// Issue 11, case 7: the idle path powers a host on only after a versioned
// write, even when the status does not change (lastPoweredOn already this
// second), so that a keyed annotation added between the read and the power
// call is honoured.
func TestRegressionPowerOnWritesFirst(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{}, reboot.Host{Online: true})
	w.pw.OutOfBandOff()
	w.clk.Advance(time.Minute)
	now := w.clk.Now().Truncate(time.Second)
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Status.LastPoweredOn = now }))
	w.r = w.reconciler()
	w.pass(t) // the restarted controller's first pass: quiet from here
	w.clk.Advance(31 * time.Second)
	// LastPoweredOn, read by the first pass, is this second again: the
	// wall clock stepped back. (Written by someone else instead, it would
	// be another leader's power-on, which restarts QuietFor: review 36
	// round 3, TestReview36_StandbyIgnoresOtherLeadersPowerOn.)
	w.clk.Set(now)
	// A client adds its key while the Reconciler reads the power.
	w.ctl.OnRead = func() {
		_ = w.store.Mutate("h", func(h *reboot.Host) { h.Annotations["reboot.metal3.io/fencing"] = `{"mode":"hard"}` })
	}
	calls := len(w.pw.Calls())
	_, err := w.r.Reconcile(w.ctx, "h")
	require.ErrorIs(t, err, reboot.ErrConflict, "the versioned write must fail")
	for _, c := range w.pw.Calls()[calls:] {
		assert.NotEqual(t, fake.OpOn, c.Op, "powered on while a keyed annotation was present")
	}
	assert.False(t, w.pw.HardwareOn())
}
