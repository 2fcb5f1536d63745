package reboot_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// poweredOnByCommand returns the first power-on by command at or after
// from in the hardware's ground truth (zero if none).
func poweredOnByCommand(pw *fake.Power, from time.Time) time.Time {
	for _, tc := range pw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && !tc.At.Before(from) {
			return tc.At
		}
	}
	return time.Time{}
}

// Issue 36, point 1: on a BMC whose soft power-off is a press of the power
// button (no graceful reset type), an OS that takes 45 s to shut down and
// reads 20 s late, the soft reissue after ReissueAfter (60 s) pressed the
// button again on a stale On reading and powered the held host on. No
// press may go out unless a reading that cannot be an echo of the first
// press says On.
func TestIssue36SoftReissueNeverPressesHeldHostOn(t *testing.T) {
	for _, button := range []fake.ButtonKind{fake.ButtonSoft, fake.ButtonAll} {
		t.Run(button.String(), func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{Button: button, SoftDelay: 45 * time.Second, Lag: time.Second,
				Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}}, reboot.Host{Online: true})
			client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			tk, err := client.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			start := w.clk.Real()
			w.follow(t, 10*time.Minute, func() bool { return false })
			if on := poweredOnByCommand(w.pw, start); !on.IsZero() {
				t.Fatalf("the held host was powered on by the controller %v after the request; truth %v", on.Sub(start), rebootcheck.DescribeTruth(w.pw))
			}
			require.False(t, w.pw.HardwareOn(), "held off")
			f, err := client.Fenced(w.ctx, tk)
			require.NoError(t, err)
			require.True(t, f, "fenced in the end")
		})
	}
}

// refusing is a power controller whose power-offs are refused with err
// (not carried out) until until; then it passes them through.
type refusing struct {
	power.Controller
	now   func() time.Time
	until time.Time
	err   error
}

func (r *refusing) Off(ctx context.Context, m power.Mode) error {
	if r.now().Before(r.until) {
		return r.err
	}
	return r.Controller.Off(ctx, m)
}

// Issue 36, point 3: a soft power-off refused because of the credentials
// (a password rotation in progress), refused by the Pool while it backs
// off after that, or refused as busy was not carried out: it is tried
// again soft after RetryDelay, and only SoftTimeout escalates to hard.
// (The old code counted ErrAuth and the Pool's refusal after it as a
// failed soft power-off and cut the power 10 ms after the request.)
func TestIssue36RefusedLoginIsNotTriedNotFailed(t *testing.T) {
	authErr := &power.Error{Op: "off soft", Class: power.ClassFailed, Status: 401, Message: "refused", Err: power.ErrAuth}
	for name, err := range map[string]error{
		"auth":    authErr,
		"backoff": &power.Error{Op: "off soft", Class: power.ClassFailed, Message: "not tried", Err: errors.Join(power.ErrBackoff, authErr)},
		"busy":    &power.Error{Op: "off soft", Class: power.ClassBusy, Status: 503},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{SoftDelay: 20 * time.Second}, reboot.Host{Online: true})
			ref := &refusing{Controller: w.pw, now: w.clk.Real, until: w.clk.Real().Add(45 * time.Second), err: err}
			w.r.Power = func(string) (power.Controller, error) { return ref, nil }
			client := &reboot.Client{Hosts: w.store, Key: "drain", Now: w.clk.Now}
			_, rerr := client.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, rerr)
			start := w.clk.Real()
			w.follow(t, 2*time.Minute, func() bool { return false })
			var soft []time.Duration
			for _, c := range w.pw.Calls() {
				if c.Op == fake.OpOff && c.Mode == power.ModeHard {
					t.Fatalf("hard power-off %v after the request, before SoftTimeout", c.At.Sub(start))
				}
				if c.Op == fake.OpOff {
					soft = append(soft, c.At.Sub(start))
				}
			}
			require.NotEmpty(t, soft, "soft power-off tried again once it was accepted")
			require.LessOrEqual(t, soft[0], 45*time.Second+reboot.DefaultConfig().RetryDelay, "tried again every RetryDelay")
			require.False(t, w.pw.HardwareOn(), "the OS shut down")
		})
	}
}

// Issue 36, point 4: a BMC that answers null for ten minutes while a
// reboot is pending is read backing off from QuickPoll to PollInterval, as
// after a power-off, not every QuickPoll for ever (the old code read it
// 600 times).
func TestIssue36UnknownReadingsBackOff(t *testing.T) {
	for _, mode := range []power.Mode{power.ModeHard, power.ModeSoft} {
		t.Run(mode.String(), func(t *testing.T) {
			w := newWorld(t, fake.PowerConfig{Report: fake.Report{Unknown: 1}}, reboot.Host{Online: true})
			client := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			_, err := client.Request(w.ctx, "h", mode)
			require.NoError(t, err)
			before := len(w.pw.Calls())
			const span = 10 * time.Minute
			w.follow(t, span, func() bool { return false })
			reads := 0
			for _, c := range w.pw.Calls()[before:] {
				if c.Op == fake.OpState {
					reads++
				}
			}
			cfg := reboot.DefaultConfig()
			// PollInterval apart, plus the quick reads after each power-off
			// (sent again every ReissueAfter).
			bound := int(span/cfg.PollInterval) + int(span/cfg.ReissueAfter+1)*4
			require.LessOrEqual(t, reads, bound, "reads of a BMC that answers null in %v", span)
		})
	}
}

// leasedPower is a power controller that makes calls only while its
// Reconciler holds the lease, as kube.LeaseGuard does.
type leasedPower struct {
	power.Controller
	leader bool
}

var errNotLeader = &power.Error{Op: "guard", Class: power.ClassFailed, Message: "not the leader: no power call"}

func (g *leasedPower) On(ctx context.Context) error {
	if !g.leader {
		return errNotLeader
	}
	return g.Controller.On(ctx)
}

func (g *leasedPower) Off(ctx context.Context, m power.Mode) error {
	if !g.leader {
		return errNotLeader
	}
	return g.Controller.Off(ctx, m)
}

// Issue 36, point 5: a leader handover. The old leader reads a host,
// pauses (its lease expires; the new leader starts on another host), then
// reads its clock and writes a status dated after the new leader's start.
// The store's compare-and-swap refuses that write when the new leader
// wrote the host meanwhile; when it did not, the write lands, and the new
// leader must not count its timestamps as known since its own start. (The
// old code did: its first Off reading, an echo from before an out-of-band
// power-on, became evidence 20 s too late, and Fenced vouched for an
// instant at which the hardware ran.)
func TestIssue36LeaderHandoverLateWrite(t *testing.T) {
	for _, newLeaderWrites := range []bool{false, true} {
		t.Run(fmt.Sprintf("newLeaderWritesFirst=%v", newLeaderWrites), func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			pw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
			other := fake.NewPower(clk.Real, fake.PowerConfig{})
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "g", Online: true})
			cfg := reboot.Config{StaleReads: 5 * time.Second}
			gA, gB := &leasedPower{Controller: pw, leader: true}, &leasedPower{Controller: pw}
			var b *reboot.Reconciler
			paused := false
			a := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(name string) (power.Controller, error) {
					if name == "h" && paused {
						// Between the old leader's read and its clocks: its
						// lease expires, the new leader starts.
						paused = false
						gA.leader, gB.leader = false, true
						_, err := b.Reconcile(ctx, "g")
						require.NoError(t, err)
						if newLeaderWrites {
							_, err := b.Reconcile(ctx, "h")
							require.NoError(t, err)
						}
						clk.Advance(20 * time.Second)
					}
					if name == "g" {
						return other, nil
					}
					return gA, nil
				}}
			b = &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(name string) (power.Controller, error) {
					if name == "g" {
						return other, nil
					}
					return gB, nil
				}}
			for _, n := range []string{"h", "g"} {
				_, err := a.Reconcile(ctx, n)
				require.NoError(t, err)
			}
			clk.Advance(time.Minute)
			client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
			_, err := client.Request(ctx, "h", power.ModeHard)
			require.NoError(t, err)

			paused = true
			_, err = a.Reconcile(ctx, "h")
			if newLeaderWrites {
				require.ErrorIs(t, err, reboot.ErrConflict, "the store refuses the old leader's late write")
			} else {
				require.NoError(t, err)
			}
			// The new leader powers off; reads echo 5 s; someone powers the
			// host on 4 s later, after the new leader's last reissue, and
			// the next second's Off reading echoes the power-off.
			_, err = b.Reconcile(ctx, "h")
			require.NoError(t, err)
			for i := 1; i <= 40; i++ {
				clk.Advance(500 * time.Millisecond)
				if i == 8 {
					pw.OutOfBandOn()
				}
				_, err = b.Reconcile(ctx, "h")
				require.NoError(t, err)
				h, _ := store.Get(ctx, "h")
				if e := h.Status.LastPoweredOff; !e.IsZero() && !pw.WasOffDuring(e, clk.Real()) {
					t.Fatalf("evidence %v: the hardware was not off at or after it; truth %s", e.Sub(fake.Epoch), rebootcheck.DescribeTruth(pw))
				}
			}
		})
	}
}

// followWriting is world.follow with a second writer that never stops: an
// inventory sync writing its own annotation every every, each write
// followed by a pass (a controller reconciles on every change).
func (w *world) followWriting(t *testing.T, limit, every time.Duration, stop func() bool) bool {
	t.Helper()
	end := w.clk.Real().Add(limit)
	nextWrite := w.clk.Real().Add(every)
	n := 0
	for w.clk.Real().Before(end) {
		res := w.pass(t)
		if stop() {
			return true
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Millisecond
		}
		if until := nextWrite.Sub(w.clk.Real()); until <= next {
			w.clk.Advance(until)
			n++
			require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
				h.Annotations["inventory.example.com/synced"] = fmt.Sprint(n)
			}))
			nextWrite = nextWrite.Add(every)
			continue
		}
		w.clk.Advance(next)
	}
	return stop()
}

// Issue 36, point 2: client A holds a host off; an inventory sync writes
// the record every 10 s for ever. Client B's request is answered within
// Lag + StaleReads + 1 s of its arrival. (The old code counted every write
// as a re-added request and restarted the StaleReads wait: B was never
// answered.) A raw client that removes its request and adds it again with
// the same value is still answered, also while the writer goes on.
func TestIssue36OutsideWritesDoNotStarveFence(t *testing.T) {
	const lag = time.Second
	stale := reboot.DefaultConfig().StaleReads
	w := newWorld(t, fake.PowerConfig{Lag: lag}, reboot.Host{Online: true})
	a := &reboot.Client{Hosts: w.store, Key: "a", Now: w.clk.Now}
	b := &reboot.Client{Hosts: w.store, Key: "b", Now: w.clk.Now}
	fenced := func(c *reboot.Client, tk reboot.Ticket) func() bool {
		return func() bool { f, err := c.Fenced(w.ctx, tk); require.NoError(t, err); return f }
	}
	tkA, err := a.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.True(t, w.followWriting(t, 2*time.Minute, 10*time.Second, fenced(a, tkA)), "A fenced")
	w.clk.Advance(3 * time.Second)

	tkB, err := b.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	start := w.clk.Real()
	if !w.followWriting(t, 5*time.Minute, 10*time.Second, fenced(b, tkB)) {
		t.Fatalf("B's request not answered in 5 minutes of outside writes; status %+v", w.host(t).Status)
	}
	require.LessOrEqual(t, w.clk.Real().Sub(start), lag+stale+time.Second, "B answered within Lag + StaleReads + 1 s")
	require.True(t, w.pw.WasOffDuring(tkB.At, w.clk.Real()))

	// The raw client of the seed: same value, removed and added again
	// between two passes, while the writer goes on.
	const raw, value = reboot.AnnotationPrefix + "raw", `{"mode":"hard"}`
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Annotations[raw] = value }))
	t1 := w.clk.Now()
	require.True(t, w.followWriting(t, 2*time.Minute, 10*time.Second, func() bool { return w.host(t).Status.Fenced(t1, w.clk.Now()) }))
	w.clk.Advance(4 * time.Second)
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { delete(h.Annotations, raw) }))
	t2, t2Real := w.clk.Now(), w.clk.Real()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Annotations[raw] = value }))
	if !w.followWriting(t, 5*time.Minute, 10*time.Second, func() bool { return w.host(t).Status.Fenced(t2, w.clk.Now()) }) {
		t.Fatalf("the raw client's request, added again, not answered")
	}
	require.True(t, w.pw.WasOffDuring(t2Real, w.clk.Real()))
	require.LessOrEqual(t, w.clk.Real().Sub(t2Real), 2*stale+lag+time.Second, "the raw request answered within 2 StaleReads while the writer goes on")
}

// Issue 36, point 1 through the adapters that toggle: power/redfish on a
// BMC with no graceful reset type (its soft power-off is PushPowerButton)
// and power/ipmi on a BMC that implements soft shutdown as a press of the
// power button. The OS takes 45 s to shut down, reads are 20 s late; a
// client holds the host off for ten minutes with a soft request. The
// hardware's ground truth must show no power-on by command.
func TestIssue36TogglingAdaptersNeverPowerHeldHostOn(t *testing.T) {
	pc := fake.PowerConfig{SoftDelay: 45 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}}
	for _, ad := range []struct {
		name    string
		button  fake.ButtonKind // the hardware's own button (IPMI's soft shutdown)
		connect func(t *testing.T, clk *fake.Clock, pw *fake.Power) power.Controller
	}{
		{"redfish-no-graceful", fake.ButtonNone, func(t *testing.T, clk *fake.Clock, pw *fake.Power) power.Controller {
			bmc := redfishtest.NewBMC(clk.Real, pw, "admin", "scenario-only")
			bmc.Quirks.NoGraceful = true
			srv := bmc.StartTLS()
			t.Cleanup(srv.Close)
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			c, err := redfish.Connect(context.Background(), redfish.Config{Endpoint: srv.URL, Username: "admin",
				Password: "scenario-only", RootCAs: roots, Now: clk.Real})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"ipmi-soft-is-a-press", fake.ButtonSoft, adapters[1].connect},
	} {
		t.Run(ad.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			cfg := pc
			cfg.Button = ad.button
			pw := fake.NewPower(clk.Real, cfg)
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
			ctl := ad.connect(t, clk, pw)
			r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
				Power: func(string) (power.Controller, error) { return ctl, nil }}
			_, err := r.Reconcile(ctx, "h")
			require.NoError(t, err)
			clk.Advance(5 * time.Minute) // up for longer than SoftTimeout + StaleReads
			client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
			tk, err := client.Request(ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			start := clk.Real()
			for end := start.Add(10 * time.Minute); clk.Real().Before(end); {
				res, err := r.Reconcile(ctx, "h")
				require.NoError(t, err)
				next := res.RequeueAfter
				if res.Requeue || next <= 0 {
					next = 10 * time.Millisecond
				}
				clk.Advance(next)
			}
			if on := poweredOnByCommand(pw, start); !on.IsZero() {
				t.Fatalf("the held host was powered on by a press %v after the request; truth %s", on.Sub(start), rebootcheck.DescribeTruth(pw))
			}
			f, err := client.Fenced(ctx, tk)
			require.NoError(t, err)
			require.True(t, f, "fenced")
			require.True(t, pw.WasOffDuring(start, clk.Real()))
		})
	}
}
