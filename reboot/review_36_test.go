package reboot_test

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// Review 36: every production wiring (kube.Powers, rebootkit-controller,
// examples/fence, inventory.Fleet) hands the Reconciler a power.Pool's
// controller. The Pool's controller does not forward reboot.Toggler, so
// the Reconciler never learns that a soft power-off is a press: the
// scenario of issue 36 point 1 (OS takes 45 s, reads 20 s late, soft
// reissue after ReissueAfter on a stale On) presses the button of the held
// host and powers it on, through the IPMI adapter (which sends soft
// shutdown on its own stale On read) as through a bare fake.Power.
func TestReview36_PoolHidesTogglerHeldHostPressedOn(t *testing.T) {
	pc := fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}}
	// Redfish on a BMC with no graceful reset type (its soft power-off is
	// PushPowerButton), the controller run with --soft-timeout=10m
	// --stale-reads=60s: kube.Powers builds the adapter's Config without
	// either, so its own press window is the default 180 s + 30 s, and the
	// Reconciler, which has the right bounds, is never told it toggles.
	// The OS takes 170 s, reads are 50 s late (inside the operator's
	// bounds).
	rfPC := fake.PowerConfig{SoftDelay: 170 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 50 * time.Second, NoTransitioning: true}}
	for _, tc := range []struct {
		name    string
		pc      fake.PowerConfig
		rcfg    reboot.Config
		connect func(t *testing.T, clk *fake.Clock, pw *fake.Power) func(ctx context.Context) (power.Controller, error)
	}{
		{"fake", pc, reboot.Config{}, func(t *testing.T, _ *fake.Clock, pw *fake.Power) func(ctx context.Context) (power.Controller, error) {
			return func(context.Context) (power.Controller, error) { return pw, nil }
		}},
		{"ipmi", pc, reboot.Config{}, func(t *testing.T, _ *fake.Clock, pw *fake.Power) func(ctx context.Context) (power.Controller, error) {
			bmc, err := ipmitest.NewBMC(pw, ipmitest.Config{Username: "admin", Password: "scenario-only"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = bmc.Close() })
			cfg := ipmi.Config{Host: bmc.Host(), Port: bmc.Port(), Username: "admin", Password: "scenario-only"}
			return func(ctx context.Context) (power.Controller, error) { return ipmi.Connect(ctx, cfg) }
		}},
		{"redfish-no-graceful-flags", rfPC, reboot.Config{SoftTimeout: 10 * time.Minute, StaleReads: time.Minute},
			func(t *testing.T, clk *fake.Clock, pw *fake.Power) func(ctx context.Context) (power.Controller, error) {
				bmc := redfishtest.NewBMC(clk.Real, pw, "admin", "scenario-only")
				bmc.Quirks.NoGraceful = true
				srv := bmc.StartTLS()
				t.Cleanup(srv.Close)
				roots := x509.NewCertPool()
				roots.AddCert(srv.Certificate())
				cfg := redfish.Config{Endpoint: srv.URL, Username: "admin", Password: "scenario-only", RootCAs: roots, Now: clk.Real}
				return func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			pw := fake.NewPower(clk.Real, tc.pc)
			pool := power.NewPool(power.PoolConfig{Now: clk.Real, IdleTimeout: time.Hour})
			t.Cleanup(func() { _ = pool.Close() })
			ctl := pool.Controller("h", power.Target{BMC: "bmc-h", Config: "v1", Connect: tc.connect(t, clk, pw)})
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
			r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: tc.rcfg,
				Power: func(string) (power.Controller, error) { return ctl, nil }}
			_, err := r.Reconcile(ctx, "h")
			require.NoError(t, err)
			clk.Advance(5 * time.Minute)
			client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
			_, err = client.Request(ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			start := clk.Real()
			for end := start.Add(5 * time.Minute); clk.Real().Before(end); {
				res, err := r.Reconcile(ctx, "h")
				require.NoError(t, err)
				next := res.RequeueAfter
				if res.Requeue || next <= 0 {
					next = 10 * time.Millisecond
				}
				clk.Advance(next)
			}
			if on := poweredOnByCommand(pw, start); !on.IsZero() {
				t.Fatalf("the held host was powered on by a press %v after the request (the Pool's controller hides TogglesOff); truth %s",
					on.Sub(start), rebootcheck.DescribeTruth(pw))
			}
		})
	}
}

// Review 36: the brief's "restart of the controller mid-shutdown, Online
// flipping". Online=false makes the controller press the button (soft
// off on a button BMC); Online=true comes back before the OS has shut
// down, which clears OfflineSince; the controller restarts. Its first
// pass sees neither a pending reboot nor OfflineSince and concludes that
// no power-off of a previous process can be in effect (memory.noOff), so
// SinceOff is infinite. A keyed request then gets a press on the first On
// reading taken StaleReads after the restart, which is an echo from before
// the OS finished the previous press's shutdown: the press powers the
// host on while the keyed annotation is present.
func TestReview36_RestartAfterOnlineFlipPressesOffHostOn(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 30 * time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
			Power: func(string) (power.Controller, error) { return pw, nil }}
	}
	a := newRec()
	pass := func(r *reboot.Reconciler) reboot.Result {
		res, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		return res
	}
	pass(a)
	clk.Advance(time.Minute)
	// Online=false: the controller presses the button (the OS starts a
	// 20 s shutdown).
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	pass(a)
	var press time.Time
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff {
			press = c.At
		}
	}
	require.False(t, press.IsZero(), "the Online=false power-off went out")
	// Online=true again a second later: the host still reads On (it is on,
	// shutting down), so OfflineSince is cleared.
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	pass(a)
	hh, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, hh.Status.OfflineSince.IsZero(), "OfflineSince cleared")
	// The controller restarts.
	clk.Advance(time.Second)
	b := newRec()
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	for end := start.Add(3 * time.Minute); clk.Real().Before(end); {
		res := pass(b)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	if on := poweredOnByCommand(pw, press); !on.IsZero() {
		t.Fatalf("a press powered the host on %v after the keyed request (the press %v before the restart was still in effect); truth %s",
			on.Sub(start), start.Sub(press), rebootcheck.DescribeTruth(pw))
	}
}

// Review 36: A2 says the controller powers a held host off again as soon
// as a read shows it on (within PollInterval plus the read's staleness).
// On a controller whose soft power-off may be a press (every IPMI host:
// ipmi.Controller.TogglesOff(soft) is true), the hold-break power-off of a
// soft reboot now waits until SoftTimeout + StaleReads (210 s) after the
// first press, although an Off reading taken StaleReads after that press
// (the evidence itself) proved its shutdown over: a host powered on out
// of band 70 s after the request runs, held, for another 140 s.
func TestReview36_HoldBreakWaitsOutTheWholePressWindow(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second, Lag: time.Second}, reboot.Host{Online: true})
	client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	tk, err := client.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	require.True(t, w.follow(t, 2*time.Minute, func() bool {
		f, err := client.Fenced(w.ctx, tk)
		require.NoError(t, err)
		return f
	}), "fenced")
	// Well after the evidence reading (StaleReads and more), someone powers
	// the held host on.
	w.follow(t, start.Add(70*time.Second).Sub(w.clk.Real()), func() bool { return false })
	w.pw.OutOfBandOn()
	oob := w.clk.Real()
	w.follow(t, 3*time.Minute, func() bool { return false })
	cfg := reboot.DefaultConfig()
	var off time.Time
	for _, c := range w.pw.Calls() {
		// A power-off at the very instant of the power-on counts: the
		// previous follow ended before it, so any call at oob came after.
		if c.Op == fake.OpOff && !c.At.Before(oob) {
			off = c.At
			break
		}
	}
	require.False(t, off.IsZero(), "the held host is powered off again")
	if d := off.Sub(oob); d > cfg.PollInterval+cfg.StaleReads+time.Second {
		t.Fatalf("the held host, powered on out of band %v after the request, got its power-off only %v later (A2: within PollInterval plus the read's staleness); truth %s",
			oob.Sub(start), d, rebootcheck.DescribeTruth(w.pw))
	}
}

// Review 36: the package doc's latency ("an answer comes about Lag +
// StaleReads after the request, within about a second more when the host
// reads honestly"; the issue: no scenario slower than before). On a host
// whose soft power-off may be a press (every IPMI host), a soft request
// made after an earlier reboot has completed (its Off evidence read, the
// host powered on again by the controller and read On for StaleReads)
// gets no power-off until SoftTimeout + StaleReads after the earlier
// press, although the controller's own power-on after that Off evidence
// proves the earlier press's shutdown over: the fence comes ~140 s late.
func TestReview36_SoftRequestAfterCompletedRebootHeldUpByOldPress(t *testing.T) {
	const soft, lag = 20 * time.Second, time.Second
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: soft, Lag: lag}, reboot.Host{Online: true})
	cfg := reboot.DefaultConfig()
	a := &reboot.Client{Hosts: w.store, Key: "a", Now: w.clk.Now}
	tkA, err := a.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	require.True(t, w.follow(t, 2*time.Minute, func() bool {
		f, err := a.Fenced(w.ctx, tkA)
		require.NoError(t, err)
		return f
	}), "A fenced")
	require.NoError(t, a.Release(w.ctx, tkA))
	require.True(t, w.follow(t, time.Minute, func() bool {
		d, err := a.Done(w.ctx, tkA)
		require.NoError(t, err)
		return d
	}), "A done")
	// The host is up again and has read On for longer than StaleReads.
	w.follow(t, cfg.StaleReads+5*time.Second, func() bool { return false })
	require.True(t, w.pw.HardwareOn())

	b := &reboot.Client{Hosts: w.store, Key: "b", Now: w.clk.Now}
	tkB, err := b.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	fenced := w.follow(t, 5*time.Minute, func() bool {
		f, err := b.Fenced(w.ctx, tkB)
		require.NoError(t, err)
		return f
	})
	require.True(t, fenced, "B fenced")
	took := w.clk.Real().Sub(start)
	if bound := soft + lag + cfg.StaleReads + 2*time.Second; took > bound {
		t.Fatalf("B's soft request fenced %v after it (bound %v: OS shutdown + Lag + StaleReads + 2 s); calls %v", took, bound, offCalls(w.pw, start))
	}
}

func offCalls(pw *fake.Power, from time.Time) []string {
	var out []string
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(from) {
			out = append(out, c.Mode.String()+"@"+c.At.Sub(from).String())
		}
	}
	return out
}

// refusingToggler is refusing for a controller that may press the power
// button: it forwards reboot.Toggler.
type refusingToggler struct {
	*refusing
	t reboot.Toggler
}

func (r refusingToggler) TogglesOff(m power.Mode) bool { return r.t.TogglesOff(m) }

// Review 36, issue point 3 on a controller whose soft power-off is a press
// (every IPMI host, Redfish without GracefulShutdown): a soft power-off
// refused for its credentials (a password rotation in progress) or by the
// Pool's back-off was not carried out, and must be "tried again soft after
// RetryDelay, escalation left to SoftTimeout". The Reconciler notes the
// refused call as a press (memory.lastOff, set before the call whatever
// its outcome), so pressWait holds every soft retry for SoftTimeout +
// StaleReads: the soft power-off is never sent, and SoftTimeout cuts the
// power hard although the OS would have shut down in 20 s. (power/redfish
// does the same at its level: lastOffPush is set before the POST.)
func TestReview36_RefusedPressIsNeverRetriedSoft(t *testing.T) {
	authErr := &power.Error{Op: "off soft", Class: power.ClassFailed, Status: 401, Message: "refused", Err: power.ErrAuth}
	for name, err := range map[string]error{
		"auth":    authErr,
		"backoff": &power.Error{Op: "off soft", Class: power.ClassFailed, Message: "not tried", Err: errors.Join(power.ErrBackoff, authErr)},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second}, reboot.Host{Online: true})
			ref := refusingToggler{&refusing{Controller: w.pw, now: w.clk.Real, until: w.clk.Real().Add(15 * time.Second), err: err}, w.pw}
			w.r.Power = func(string) (power.Controller, error) { return ref, nil }
			client := &reboot.Client{Hosts: w.store, Key: "drain", Now: w.clk.Now}
			_, rerr := client.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, rerr)
			start := w.clk.Real()
			w.follow(t, 4*time.Minute, func() bool { return false })
			cfg := reboot.DefaultConfig()
			var soft []time.Duration
			for _, c := range w.pw.Calls() {
				if c.Op == fake.OpOff && c.Mode == power.ModeHard {
					t.Fatalf("hard power-off %v after the request; the soft power-off was never sent once the credentials worked (soft calls reaching the BMC: %v)", c.At.Sub(start), soft)
				}
				if c.Op == fake.OpOff {
					soft = append(soft, c.At.Sub(start))
				}
			}
			require.NotEmpty(t, soft, "soft power-off tried again once it was accepted")
			require.LessOrEqual(t, soft[0], 15*time.Second+cfg.RetryDelay, "tried again after RetryDelay")
		})
	}
}

// Review 36 (found by the change's own TestRebootStateMachineButtons:
// -rapid.seed=9533285088986202907 fails after 7626 checks): A3 says a
// wall clock that jumps forward and is corrected is handled (stored
// timestamps later than the clock are repaired, evidence dropped). But
// evidence stamped while the clock ran J ahead is only dropped by a pass
// that runs before the corrected clock catches up with it. Here the clock
// runs 60 s ahead while A is fenced; it is corrected; the held host is
// powered on out of band while the controller is down for 40 s (a
// restart); client B takes T after that power-on, and at the end of the
// outage Status.Fenced(T, now) (and Client.Fenced) vouch for T from the
// old evidence, 60 s late, although the hardware has run since T.
func TestReview36_ForwardJumpEvidenceSurvivesCorrection(t *testing.T) {
	t.Skip("known, see doc A3: evidence stamped while the wall clock ran ahead vouches once the corrected clock passes it, if no controller pass ran in between")
	w := newWorld(t, fake.PowerConfig{}, reboot.Host{Online: true})
	w.clk.Jump(60 * time.Second) // the controller's and the clients' wall clock runs ahead
	a := &reboot.Client{Hosts: w.store, Key: "a", Now: w.clk.Now}
	tkA, err := a.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.True(t, w.follow(t, 2*time.Minute, func() bool {
		f, err := a.Fenced(w.ctx, tkA)
		require.NoError(t, err)
		return f
	}), "A fenced")
	w.clk.Advance(time.Second)
	w.clk.Correct()                // NTP steps the clock back
	w.pw.OutOfBandOn()             // someone powers the held host on...
	w.clk.Advance(8 * time.Second) // ...while the controller restarts
	b := &reboot.Client{Hosts: w.store, Key: "b", Now: w.clk.Now}
	tkB, err := b.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	tB := w.clk.Real()
	w.clk.Advance(55 * time.Second)
	f, err := b.Fenced(w.ctx, tkB)
	require.NoError(t, err)
	if f && !w.pw.WasOffDuring(tB, w.clk.Real()) {
		t.Fatalf("B told fenced for T=%v (evidence %v, now %v) but the hardware has run since T; truth %s",
			tkB.At.Sub(fake.Epoch), w.host(t).Status.LastPoweredOff.Sub(fake.Epoch), w.clk.Now().Sub(fake.Epoch), rebootcheck.DescribeTruth(w.pw))
	}
}
