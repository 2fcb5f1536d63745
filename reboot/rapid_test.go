package reboot_test

import (
	"context"
	"errors"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"pgregory.net/rapid"
)

var errCrash = errors.New("test: process crashed before the power call")

// crashable wraps a power controller; when armed, the next On or Off is
// not sent and the process "crashes" (the test restarts the reconciler).
type crashable struct {
	power.Controller
	armed   bool
	crashed bool
}

func (c *crashable) On(ctx context.Context) error {
	if c.armed {
		c.armed, c.crashed = false, true
		return errCrash
	}
	return c.Controller.On(ctx)
}

func (c *crashable) Off(ctx context.Context, m power.Mode) error {
	if c.armed {
		c.armed, c.crashed = false, true
		return errCrash
	}
	return c.Controller.Off(ctx, m)
}

// request is one client request as the model sees it.
type request struct {
	key       string // "" = bare
	at        time.Time
	offIndex  int  // the number of off transitions when it was made
	offThen   bool // the host was off when it was made
	withdrawn bool // the client removed it before it was satisfied
}

// satisfied: the host has been off since the request was made.
func (rq request) satisfied(offs int) bool { return rq.offThen || offs > rq.offIndex }

// TestRebootStateMachine drives the Reconciler with several clients adding
// and removing annotations at random, a fake power controller with lag,
// slow or ignored soft shutdown and injected faults, store conflicts,
// crashes and restarts between any two steps, and a clock that jumps (also
// backwards). After every step it checks the safety invariants; at the end,
// with faults stopped and clients cooperating, it checks liveness.
func TestRebootStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		high := clk.Now()
		pw := fake.NewPower(clk.Now, fake.PowerConfig{
			Lag:        time.Duration(rapid.IntRange(0, 10).Draw(t, "lag")) * time.Second,
			SoftDelay:  time.Duration(rapid.IntRange(0, 90).Draw(t, "softDelay")) * time.Second,
			IgnoreSoft: rapid.Bool().Draw(t, "ignoreSoft"),
		})
		ctl := &crashable{Controller: pw}
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
		newReconciler := func() *reboot.Reconciler {
			return &reboot.Reconciler{
				Hosts: store,
				Power: func(string) (power.Controller, error) { return ctl, nil },
				Now:   clk.Now,
			}
		}
		r := newReconciler()

		keys := []string{"", "fencing", "drain", "storage"}
		open := map[string]request{} // requests whose annotation is present
		var all []request
		episodes := 0
		var lastPending time.Time
		jumpedBack := false

		var offsAndStable func() (int, power.State)
		// offs counts power-offs: changes to off from on (a power-on that
		// was abandoned before it completed is not a new power-off).
		offs := func() int { n, _ := offsAndStable(); return n }
		offsAndStable = func() (int, power.State) {
			n, stable := 0, power.StateOn
			for _, tr := range pw.Transitions() {
				switch tr.To {
				case power.StateOff:
					if stable == power.StateOn {
						n++
					}
					stable = power.StateOff
				case power.StateOn:
					stable = power.StateOn
				}
			}
			return n, stable
		}
		host := func() reboot.Host {
			h, err := store.Get(ctx, "h")
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		annotate := func(key, value string) {
			name := reboot.Annotation
			if key != "" {
				name = reboot.AnnotationPrefix + key
			}
			if err := store.Mutate("h", func(h *reboot.Host) { h.Annotations[name] = value }); err != nil {
				t.Fatal(err)
			}
			if _, ok := open[key]; !ok {
				n, stable := offsAndStable()
				rq := request{key: key, at: clk.Now(), offIndex: n, offThen: stable == power.StateOff}
				open[key] = rq
				all = append(all, rq)
			}
		}
		unannotate := func(key string) {
			if rq := open[key]; !rq.satisfied(offs()) {
				for i := range all {
					if all[i].key == key && all[i].at.Equal(rq.at) && all[i].offIndex == rq.offIndex {
						all[i].withdrawn = true
					}
				}
			}
			if err := store.Mutate("h", func(h *reboot.Host) { delete(h.Annotations, reboot.AnnotationPrefix+key) }); err != nil {
				t.Fatal(err)
			}
			delete(open, key)
		}

		// reconcile runs one pass and checks the invariants that concern
		// what the pass did.
		reconcile := func() {
			before := host()
			callsBefore := len(pw.Calls())
			_, err := r.Reconcile(ctx, "h")
			if err != nil && !errors.Is(err, reboot.ErrConflict) {
				t.Fatalf("reconcile: %v", err)
			}
			if ctl.crashed {
				ctl.crashed = false
				r = newReconciler()
			}
			after := host()
			calls := pw.Calls()[callsBefore:]
			var observed power.State = power.StateUnknown
			for _, c := range calls {
				if c.Op == fake.OpState && c.Err == nil {
					observed = c.Reported
				}
				// Never powered on while a keyed annotation remains.
				if c.Op == fake.OpOn {
					for k := range after.Annotations {
						if k != reboot.Annotation && reboot.IsRebootAnnotation(k) {
							t.Fatalf("power-on sent while %s is present", k)
						}
					}
				}
			}
			// The bare annotation is removed only by a pass that saw the
			// host off, after the request was made.
			if _, had := before.Annotations[reboot.Annotation]; had {
				if _, has := after.Annotations[reboot.Annotation]; !has {
					if observed != power.StateOff {
						t.Fatalf("bare annotation removed in a pass that observed %v", observed)
					}
					delete(open, "")
				}
			}
			if after.Status.Pending() && !after.Status.PendingRebootSince.Equal(lastPending) {
				episodes++
				lastPending = after.Status.PendingRebootSince
			}
		}

		check := func() {
			h := host()
			// Client-owned annotations are removed only by their owners.
			for _, k := range keys[1:] {
				_, inStore := h.Annotations[reboot.AnnotationPrefix+k]
				_, inModel := open[k]
				if inStore != inModel {
					t.Fatalf("annotation %s: in store %v, client thinks %v", k, inStore, inModel)
				}
			}
			// A request never causes two power cycles.
			if n := offs(); n > episodes {
				t.Fatalf("%d power-offs for %d reboots", n, episodes)
			}
			if c := pw.Cycles(); c > episodes {
				t.Fatalf("%d power cycles for %d reboots", c, episodes)
			}
		}

		steps := rapid.IntRange(1, 80).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 11).Draw(t, "action") {
			case 0, 1, 2:
				reconcile()
			case 3:
				k := rapid.SampledFrom(keys).Draw(t, "key")
				v := rapid.SampledFrom([]string{"", `{"mode":"hard"}`, `{"mode":"soft"}`, "not json"}).Draw(t, "value")
				annotate(k, v)
			case 4:
				k := rapid.SampledFrom(keys[1:]).Draw(t, "key")
				if _, ok := open[k]; ok {
					unannotate(k)
				}
			case 5:
				now := clk.Advance(time.Duration(rapid.IntRange(0, 120).Draw(t, "advance")) * time.Second)
				if now.After(high) {
					high = now
				}
			case 6:
				clk.Advance(-time.Duration(rapid.IntRange(1, 30).Draw(t, "back")) * time.Second)
				jumpedBack = true
			case 7:
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "faultOp")
				k := rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout, fake.FaultUnsupported}).Draw(t, "fault")
				pw.FailNext(op, fake.Fault{Kind: k, Applied: rapid.Bool().Draw(t, "applied")})
			case 8:
				r = newReconciler() // restart between two steps
			case 9:
				ctl.armed = true // crash after persisting, before the power call
			case 10:
				store.FailUpdates(1)
			case 11:
				// A cooperative client: remove a key once the host went off
				// after its request.
				for k, rq := range open {
					if k != "" && rq.satisfied(offs()) {
						unannotate(k)
						break
					}
				}
			}
			check()
		}

		// Liveness: faults stop, clients cooperate, the clock runs forward.
		ctl.armed = false
		if clk.Now().Before(high) {
			clk.Set(high)
		}
		for i := 0; i < 400; i++ {
			for k, rq := range open {
				if k != "" && rq.satisfied(offs()) {
					unannotate(k)
				}
			}
			reconcile()
			check()
			h := host()
			if len(open) == 0 && !h.Status.Pending() && pw.Current() == power.StateOn && !hasReboot(h) {
				break
			}
			clk.Advance(5 * time.Second)
		}
		h := host()
		if hasReboot(h) || h.Status.Pending() || pw.Current() != power.StateOn {
			t.Fatalf("did not converge: annotations %v, status %+v, power %v", h.Annotations, h.Status, pw.Current())
		}
		for _, rq := range all {
			if !rq.withdrawn && !rq.satisfied(offs()) {
				t.Fatalf("request %q at %v was never followed by a power-off", rq.key, rq.at)
			}
			if rq.key == "" && !rq.withdrawn && !jumpedBack && !h.Status.LastPoweredOn.After(rq.at.Truncate(time.Second)) {
				t.Fatalf("lastPoweredOn %v not later than request %q at %v", h.Status.LastPoweredOn, rq.key, rq.at)
			}
		}
	})
}

func hasReboot(h reboot.Host) bool {
	for k := range h.Annotations {
		if reboot.IsRebootAnnotation(k) {
			return true
		}
	}
	return false
}
