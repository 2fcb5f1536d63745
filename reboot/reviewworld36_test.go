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

// review36Lander is a controller one of whose calls had its answer lost
// and is carried out later by the BMC (A5).
type review36Lander interface {
	power.Controller
	// landing says when the lost call lands and whether it is still to.
	landing() (at time.Time, pending bool)
	// landNow carries the lost call out on the hardware (and clears pending).
	landNow(ctx context.Context) error
}

func (l *lostSoftOff) landing() (time.Time, bool) { return l.landAt, l.pending }

func (l *lostSoftOff) landNow(ctx context.Context) error {
	l.pending = false
	return l.Power.Off(ctx, power.ModeSoft) // the BMC applies the lost press
}

func (l *slowLostSoftOff) landing() (time.Time, bool) { return l.landAt, l.pending }

func (l *slowLostSoftOff) landNow(ctx context.Context) error {
	l.pending = false
	return l.Power.Off(ctx, power.ModeSoft)
}

func (a *asyncLostSoftOff) landing() (time.Time, bool) { return a.landAt, a.pending }

func (a *asyncLostSoftOff) landNow(ctx context.Context) error {
	a.pending = false
	return a.Power.Off(ctx, power.ModeSoft)
}

func (l *lostOnPress) landing() (time.Time, bool) { return l.landAt, l.pending }

func (l *lostOnPress) landNow(ctx context.Context) error {
	l.pending = false
	return l.Power.On(ctx) // the BMC carries out the lost press
}

// review36LostRun is the script of a "lost call lands later" test: from
// start Online=false is enforced, the lost call lands when its controller
// says, Online=true is set at onlineAt, and a keyed (held) request "b"
// comes at requestAt (or, when requestWhen is set, at the first pass it
// is true), until end.
type review36LostRun struct {
	start, end          time.Time
	onlineAt, requestAt time.Time
	requestWhen         func() bool
	// arm, if set, is called with Online=true.
	arm func()
	// restart, if set, runs at the top of each pass (after the
	// Online=false): a Reconciler it returns replaces the running one.
	restart func() *reboot.Reconciler
	// also lists more times no step passes over (read every pass).
	also func() []time.Time
	// maxStep, if not zero, bounds every step.
	maxStep time.Duration
	// logActions logs only passes that decide a power action; logOn
	// logs the hardware's state too.
	logActions, logOn bool
}

// run plays the script on rec and pw and returns when the lost call
// landed (zero: never) and when the request came.
func (s review36LostRun) run(t *testing.T, clk *fake.Clock, store *fake.RebootHosts, rec *reboot.Reconciler, pw review36Lander, hw *fake.Power) (landed, requestAt time.Time) {
	t.Helper()
	ctx := context.Background()
	requestAt = s.requestAt
	offline, online, requested := false, false, false
	for clk.Real().Before(s.end) {
		if !offline && !clk.Real().Before(s.start) {
			offline = true
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
		}
		if s.restart != nil {
			if r := s.restart(); r != nil {
				rec = r
			}
		}
		if at, pending := pw.landing(); pending && !clk.Real().Before(at) {
			landed = clk.Real()
			require.NoError(t, pw.landNow(ctx))
		}
		if !online && !clk.Real().Before(s.onlineAt) {
			online = true
			if s.arm != nil {
				s.arm()
			}
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
		}
		if s.requestWhen != nil {
			if !requested && s.requestWhen() {
				requested, requestAt = true, clk.Real()
				require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
					h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": ""}
				}))
			}
		} else if !requested && !clk.Real().Before(s.requestAt) {
			requested = true
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": ""}
			}))
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && !clk.Real().Before(s.start) && (!s.logActions || res.Decision.Power != reboot.ActionNone) {
			if s.logOn {
				t.Logf("%v on=%v %v %v %s %v", clk.Real().Sub(s.start), hw.HardwareOn(), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
			} else {
				t.Logf("%v %v %v %s %v", clk.Real().Sub(s.start), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
			}
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		if s.maxStep > 0 {
			next = min(next, s.maxStep)
		}
		landAt, _ := pw.landing()
		ats := []time.Time{s.start, s.onlineAt, landAt}
		if s.requestWhen == nil {
			ats = append(ats, s.requestAt)
		}
		if s.also != nil {
			ats = append(ats, s.also()...)
		}
		for _, at := range ats {
			if d := at.Sub(clk.Real()); d > 0 && d < next {
				next = d
			}
		}
		clk.Advance(max(next, time.Millisecond))
	}
	return landed, requestAt
}

// review36OnByCommandAfter returns the first power-on a command caused
// after t in pw's ground truth.
func review36OnByCommandAfter(pw *fake.Power, t time.Time) (fake.TruthChange, bool) {
	for _, tc := range pw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(t) {
			return tc, true
		}
	}
	return fake.TruthChange{}, false
}

// review36OffAfter reports whether pw's hardware went off after t
// (ground truth).
func review36OffAfter(pw *fake.Power, t time.Time) bool {
	for _, tc := range pw.Truth() {
		if !tc.On && tc.At.After(t) {
			return true
		}
	}
	return false
}

// review36SendLost runs rec every RequeueAfter (at least 100 ms), calling
// also (if set) after each pass, until it decides action (for a
// power-off, a soft one) and returns when: that call's answer must have
// been lost. within, if not zero, bounds the wait: zero is returned if it
// passed.
func review36SendLost(t *testing.T, clk *fake.Clock, rec *reboot.Reconciler, action reboot.Action, within time.Duration, also func()) time.Time {
	t.Helper()
	ctx := context.Background()
	var lostAt time.Time
	for end := clk.Real().Add(within); lostAt.IsZero() && (within == 0 || clk.Real().Before(end)); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if also != nil {
			also()
		}
		if res.Decision.Power == action {
			if action == reboot.ActionPowerOn {
				require.Error(t, res.PowerErr, "the setup: the first power-on's answer is lost")
			} else {
				require.Equal(t, power.ModeSoft, res.Decision.Mode, "the setup: the soft press")
				require.Error(t, res.PowerErr, "the setup: the press's answer is lost")
			}
			lostAt = clk.Real()
			break
		}
		clk.Advance(max(res.RequeueAfter, 100*time.Millisecond))
	}
	return lostAt
}

// review36RunAfterLost runs rec every RequeueAfter (100 ms if none, at
// most 1 s) until 8 minutes after lostAt.
func review36RunAfterLost(t *testing.T, clk *fake.Clock, rec *reboot.Reconciler, lostAt time.Time) {
	t.Helper()
	review36Run(t, clk, rec, lostAt, lostAt.Add(8*time.Minute), time.Second, nil)
}

// review36Run runs rec every RequeueAfter (100 ms if none; at most
// maxStep if not zero) until end, calling before (if set) first in each
// pass; it logs the passes that decide a power action, timed from from.
func review36Run(t *testing.T, clk *fake.Clock, rec *reboot.Reconciler, from, end time.Time, maxStep time.Duration, before func()) {
	t.Helper()
	ctx := context.Background()
	for clk.Real().Before(end) {
		if before != nil {
			before()
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(from), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		next = max(next, time.Millisecond)
		if maxStep > 0 {
			next = min(next, maxStep)
		}
		clk.Advance(next)
	}
}

// review36RequestBeforeLanding runs rec (a restarted or upgraded
// controller) every RequeueAfter (100 ms if none) until 8 minutes after
// lostAt; a client's keyed request "fence" comes at the first pass that
// finds the hardware on less than land after lostAt (before the lost
// power-on press lands). It returns whether and when it came.
func review36RequestBeforeLanding(t *testing.T, clk *fake.Clock, store *fake.RebootHosts, rec *reboot.Reconciler, pw *fake.Power, lostAt time.Time, land time.Duration) (requested bool, requestAt time.Time) {
	t.Helper()
	review36Run(t, clk, rec, lostAt, lostAt.Add(8*time.Minute), 0, func() {
		if !requested && pw.HardwareOn() && clk.Real().Sub(lostAt) < land {
			requested, requestAt = true, clk.Real()
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": "t1"}
			}))
		}
	})
	return requested, requestAt
}

// review36OffThenOn returns, in pw's ground truth after from (from
// included if at), the first power-off and the first power-on after it.
func review36OffThenOn(pw *fake.Power, from time.Time, at bool) (offAt time.Time, on fake.TruthChange, found bool) {
	for _, tc := range pw.Truth() {
		if tc.At.Before(from) || !at && tc.At.Equal(from) {
			continue
		}
		if !tc.On && offAt.IsZero() {
			offAt = tc.At
		}
		if tc.On && !offAt.IsZero() {
			return offAt, tc, true
		}
	}
	return offAt, fake.TruthChange{}, false
}

// review36PressWorld returns a world and its controller: with all, a BMC
// whose every call presses the power button (fake.ButtonAll) of a host
// that is off; else an iLO-like one whose soft power-off presses it
// (fake.ButtonSoft) of a host that runs. The OS shuts down in 45 s,
// readings are 1 s old.
func review36PressWorld(all bool) (*review36World, *fake.Power) {
	w := newReview36World()
	pc := fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}}
	if all {
		pc.Initial, pc.Button = power.StateOff, fake.ButtonAll
	}
	pw := fake.NewPower(w.clk.Real, pc)
	w.Power = pw
	return w, pw
}

// review36OffCalls returns the power-offs in pw's call log.
func review36OffCalls(pw *fake.Power) []fake.Call {
	var offs []fake.Call
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff {
			offs = append(offs, c)
		}
	}
	return offs
}

// review36FirstOffFrom returns the power-offs in pw's call log and the
// first of them sent at or after from, if any.
func review36FirstOffFrom(pw *fake.Power, from time.Time) (offs []fake.Call, first fake.Call, ok bool) {
	offs = review36OffCalls(pw)
	for _, c := range offs {
		if !c.At.Before(from) {
			return offs, c, true
		}
	}
	return offs, fake.Call{}, false
}

// review36FirstHard returns the first hard power-off of offs, nil if none.
func review36FirstHard(offs []fake.Call) *fake.Call {
	for i := range offs {
		if offs[i].Mode == power.ModeHard {
			return &offs[i]
		}
	}
	return nil
}

// review36RunUntilOff runs rec every RequeueAfter (1 s if none, at most
// 10 s) from start until the hardware has been off (ground truth) or for
// d; log logs the passes that decide a power action.
func review36RunUntilOff(t *testing.T, clk *fake.Clock, rec *reboot.Reconciler, pw *fake.Power, start time.Time, d time.Duration, log bool) {
	t.Helper()
	ctx := context.Background()
	for end := start.Add(d); clk.Real().Before(end) && !pw.WasOffDuring(start, clk.Real()); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if log && testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s", clk.Real().Sub(start), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(max(next, time.Millisecond), 10*time.Second))
	}
}

// review36TrackerPass is one pass of a caller that runs Decide itself
// with a Tracker over pc (an inFlight BMC), in the order Tracker's doc
// gives, taking pc's late answer before Observe; the Reading's toggles
// are pc's. A power call that failed asks for the next pass at once
// (RequeueAfter 0). An error of the store's Update is returned.
func review36TrackerPass(ctx context.Context, tr *reboot.Tracker, cfg reboot.Config, store *fake.RebootHosts, pc *inFlight, clk *fake.Clock) (reboot.Decision, error) {
	h, err := store.Get(ctx, "h")
	if err != nil {
		return reboot.Decision{}, err
	}
	rd := reboot.Reading{Host: h, Now: clk.Now(), Mono: clk.Monotonic(), SoftToggles: pc.toggles, HardToggles: pc.toggles}
	if rd.Power, err = pc.State(ctx); err != nil {
		rd.Power = power.StateUnknown
	}
	rd.ReadEnd = clk.Monotonic()
	if a, ok := pc.LateAnswer(); ok {
		tr.Late(a, clk.Now(), clk.Monotonic())
	}
	d := cfg.Decide(tr.Observe(rd, cfg), rd.Now)
	written := ""
	if d.UpdateStatus {
		nh := h
		nh.Status = d.Status
		nh.Annotations = map[string]string{}
		for k, v := range h.Annotations {
			nh.Annotations[k] = v
		}
		for _, k := range d.RemoveAnnotations {
			delete(nh.Annotations, k)
		}
		tr.Writing(d)
		w, err := store.Update(ctx, nh)
		if err != nil {
			return d, err
		}
		written = w.Version
	}
	tr.Applied(d, written)
	if d.Power != reboot.ActionNone {
		tr.Sending(d.Power, d.Mode, clk.Monotonic())
		if d.Power == reboot.ActionPowerOn {
			err = pc.On(ctx)
		} else {
			err = pc.Off(ctx, d.Mode)
		}
		tr.Sent(reboot.Call{Action: d.Power, Mode: d.Mode, Class: reboot.CallClass(err), At: clk.Now()}, err, clk.Monotonic())
		if err != nil {
			d.RequeueAfter = 0
		}
	}
	return d, nil
}

// review36SlowShutdown returns the fake behind the lost soft shutdown
// tests (review 36 rounds 12-14): a BMC whose soft power-off presses the
// power button (fake.ButtonSoft) of a host whose OS takes 170 s to shut
// down, its readings 29 s old (< StaleReads).
func review36SlowShutdown(clk *fake.Clock) *fake.Power {
	return fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 170 * time.Second,
		Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
}

// review36HungSoftOff returns a world whose BMC (no button, OS 20 s) is
// behind pc, an inFlight call whose first power-off hangs 100 s and then
// fails (HTTP 500), answered busy while it runs.
func review36HungSoftOff() (*review36World, *fake.Power, *inFlight) {
	w := newReview36World()
	pw := fake.NewPower(w.clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	pc := &inFlight{Power: pw, clk: w.clk, landAfter: 100 * time.Second, oneCall: true,
		fail: &power.Error{Op: "power off soft", Class: power.ClassFailed, Message: "HTTP 500: internal error"}}
	w.Power = pc
	return w, pw, pc
}

// settled sets the world's controller to ctl and returns a Reconciler
// that has run for long: 10 passes, a minute apart.
func (w *review36World) settled(t *testing.T, ctl power.Controller) *reboot.Reconciler {
	t.Helper()
	w.Power = ctl
	rec := w.newRec()
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(context.Background(), "h")
		require.NoError(t, err)
		w.clk.Advance(time.Minute)
	}
	return rec
}

// review36InPOST returns a world whose host, off at first, the
// controller (returned) has powered on, 5 s into its POST: it reads
// Transitioning, and its OS ignores a soft power-off until it has booted
// (bootingIgnoresSoft). POST takes 60 s (PoweringOn meanwhile); the OS
// shuts down 90 s after a soft power-off it hears and the power then
// takes Lag (60 s) to go: off 150 s after it (inside SoftTimeout, 180 s).
func review36InPOST(t *testing.T) (*review36World, *fake.Power, *reboot.Reconciler) {
	t.Helper()
	w := newReview36World()
	pw := fake.NewPower(w.clk.Real, fake.PowerConfig{Initial: power.StateOff, Lag: 60 * time.Second, SoftDelay: 90 * time.Second})
	w.Power = bootingIgnoresSoft{pw}
	rec := w.newRec()
	// The controller powers the host on.
	for i := 0; i < 40 && !pw.HardwareOn(); i++ {
		_, err := rec.Reconcile(context.Background(), "h")
		require.NoError(t, err)
		w.clk.Advance(time.Second)
	}
	require.True(t, pw.HardwareOn(), "not powered on")
	w.clk.Advance(5 * time.Second)
	require.Equal(t, power.StateTransitioning, pw.Current(), "the host should still be powering on")
	return w, pw, rec
}

// review36RequireFirstOffSoft fails the test unless the first power-off
// in pw's call log sent at or after req is soft: msg (with the args
// c.At.Sub(req), softTimeout and the power-offs) if it is not, "no
// power-off reached the BMC after the request" if there is none.
func review36RequireFirstOffSoft(t *testing.T, pw *fake.Power, req time.Time, softTimeout time.Duration, msg string) {
	t.Helper()
	offs, c, ok := review36FirstOffFrom(pw, req)
	if !ok {
		t.Fatalf("no power-off reached the BMC after the request; power-offs %v", offs)
	}
	require.Equal(t, power.ModeSoft, c.Mode, msg, c.At.Sub(req), softTimeout, offs)
}

// review36NoOnPressBeforeLanding checks the outcome of a run in which
// review36RequestBeforeLanding found the host never powered on before
// the lost power-on press (returned at lostAt) landed: since
// TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand no power-on
// that may press goes out while a lost press may still land (the
// restarted controller counted the previous process's press), so no
// power-on was sent before the landing, and the landed press left the
// host on. A controller that forgot the press presses On again at once,
// and the caller's own checks then run.
func review36NoOnPressBeforeLanding(t *testing.T, pw *fake.Power, lostAt time.Time, land time.Duration) {
	t.Helper()
	for _, c := range pw.Calls() {
		require.False(t, c.Op == fake.OpOn && c.At.After(lostAt) && c.At.Before(lostAt.Add(land)),
			"a power-on press sent at %v after the lost one, before it landed; truth %s", c.At.Sub(lostAt), rebootcheck.DescribeTruth(pw))
	}
	require.True(t, pw.HardwareOn(), "the lost press landed and left the host on; truth %s", rebootcheck.DescribeTruth(pw))
}
