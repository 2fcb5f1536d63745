package kube

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// errInjected is the answer of a write the test made fail.
var errInjected = errors.New("test: injected API error")

// faultyClient is the controller's (cache-backed) client with one write
// fault armed at a time: a write to the BareMetalHost (the annotations) or
// to its RebootRecord (the status) that fails before it reaches the API
// server, or one that is applied and whose answer is lost. A fault on the
// record's write is a crash between the two writes of one Update.
type faultyClient struct {
	client.Client
	armed   bool
	record  bool // the fault hits the record's write, else the host's
	applied bool
}

func (c *faultyClient) write(obj client.Object, do func() error) error {
	_, isRecord := obj.(*v1alpha1.RebootRecord)
	if !c.armed || c.record != isRecord {
		return do()
	}
	c.armed = false
	if c.applied {
		if err := do(); err != nil {
			return err
		}
	}
	return fmt.Errorf("write %s: %w (applied %v)", obj.GetName(), errInjected, c.applied)
}

func (c *faultyClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.write(obj, func() error { return c.Client.Patch(ctx, obj, p, opts...) })
}

func (c *faultyClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.write(obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *faultyClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.write(obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

// interlopingHosts runs a second writer armed by the test just before the
// controller's next write.
type interlopingHosts struct {
	*RebootHosts
	before func()
}

func (s *interlopingHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.RebootHosts.Update(ctx, h)
}

// kubeChecks is how many cases TestRebootStateMachineOnAPIServer draws
// when -rapid.checks is not given: every step is a few requests to a real
// API server.
const kubeChecks = "50"

// rapidChecksGiven reports whether -rapid.checks was on the command line
// (asked once, before this file sets the flag itself).
var rapidChecksGiven = sync.OnceValue(func() bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	return given
})

// TestRebootStateMachineOnAPIServer is the reboot state machine on real
// objects: the reboot Reconciler over RebootHosts reading through a
// manager's cache (which lags the API server) as the controller does, under
// the generated RBAC, with fencing clients and second writers on the API
// server itself. Its world is drawn from the adversary fakes: a BMC that
// reports stale, flapping or unknown states, lags and ignores soft
// shutdowns, injected and applied BMC faults, power switched out of band,
// a wall clock that jumps both ways, crashes before power calls and
// restarts, writes to the API server that fail or are applied with their
// answer lost (also between the host's and the record's write of one
// update), second writers between the controller's read and write
// (clients requesting and releasing, kubectl touching annotations, another
// controller writing a field this module does not know), a client forging
// the old status annotation, and the record deleted under the controller.
//
// After every step, against ground truth (the fake hardware's timeline and
// what the API server holds):
//   - a client told fenced was told the truth: the hardware was off at
//     some real instant at or after its T (less the clock's back jumps);
//   - no power-on is sent while a keyed annotation is on the host, nor in
//     a pass whose power read was unknown;
//   - the bare annotation is removed only after the hardware was off since
//     it was written;
//   - keyed annotations are removed only by their owners;
//   - the other controller's field and kubectl's annotation are kept;
//   - power cycles by command ≤ reboots decided + out-of-band power-offs.
//
// At the end the world behaves and every client is told fenced, releases,
// and the host ends on with nothing pending.
func TestRebootStateMachineOnAPIServer(t *testing.T) {
	needAPIServer(t)
	if !rapidChecksGiven() {
		was := flag.Lookup("rapid.checks").Value.String()
		if err := flag.Set("rapid.checks", kubeChecks); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = flag.Set("rapid.checks", was) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	mgr := namespacedManager(t, ns)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	cases := 0

	rapidcheck.Check(t, func(rt *rapid.T) {
		cases++
		name := fmt.Sprintf("h%d", cases)
		newBMH(t, direct, ns, name)
		key := client.ObjectKey{Namespace: ns, Name: name}
		// The controller learns of a host from its cache: wait for it there.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			err := mgr.GetClient().Get(ctx, key, newBMHRef(ns, name))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				rt.Fatalf("host %s never reached the cache: %v", name, err)
			}
		}

		clk := fake.NewClock(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
		cfg := fake.DrawPowerConfig(rt, "power")
		pw := fake.NewPower(clk.Real, cfg)
		rcfg := reboot.Config{OffSettle: fake.MaxEarlyOff}
		if rapid.Bool().Draw(rt, "tight") {
			rcfg = reboot.Config{StaleReads: max(cfg.Report.Stale, time.Millisecond), OffSettle: cfg.Report.EarlyOff}
		}
		fc := &faultyClient{Client: mgr.GetClient()}
		hosts := &interlopingHosts{RebootHosts: &RebootHosts{Client: fc, Namespace: ns}}
		probe := &rebootcheck.Probe{Controller: pw}
		newReconciler := func() *reboot.Reconciler {
			return &reboot.Reconciler{Hosts: hosts, Now: clk.Now, Monotonic: clk.Monotonic, Config: rcfg,
				Power: func(string) (power.Controller, error) { return probe, nil }}
		}
		r := newReconciler()

		truthStore := &RebootHosts{Client: direct, Namespace: ns}
		host := func() reboot.Host {
			h, err := truthStore.Get(ctx, name)
			if err != nil {
				rt.Fatalf("read %s: %v", name, err)
			}
			return h
		}
		// annotate is kubectl annotate: a merge patch, no precondition.
		annotate := func(k string, v *string) {
			var val any
			if v != nil {
				val = *v
			}
			p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, k, jsonOf(val)))
			if err := direct.Patch(ctx, newBMHRef(ns, name), p); err != nil {
				rt.Fatalf("annotate %s: %v", k, err)
			}
		}
		future := ""
		setFutureField := func() {
			future = clk.Real().Format(time.RFC3339Nano)
			p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{%q:%q},"metadata":{"labels":{"other-controller":"x"}}}`, FutureField, future))
			if err := direct.Patch(ctx, newBMHRef(ns, name), p); err != nil {
				rt.Fatalf("the other controller's write: %v", err)
			}
		}
		touched := ""
		touch := func() {
			touched = fmt.Sprint(clk.Real().UnixNano())
			annotate("example.com/touch", &touched)
		}

		keys := []string{"fencing", "drain", "storage"}
		clients := map[string]*reboot.Client{}
		for _, k := range keys {
			clients[k] = &reboot.Client{Hosts: truthStore, Key: k, Now: clk.Now}
		}
		open := map[string]rebootcheck.Ticket{}
		const rawKey, rawValue = reboot.AnnotationPrefix + "raw", `{"mode":"hard"}`
		var raw *rebootcheck.Ticket
		var bareAt time.Time
		episodes := 0
		var lastPending time.Time
		var backJumps time.Duration
		lastWall := clk.Now()

		probe.OnOn = func() {
			if probe.LastRead == power.StateUnknown {
				rt.Fatalf("power-on sent in a pass whose power read was unknown")
			}
			if k := rebootcheck.HeldBy(host()); k != "" {
				rt.Fatalf("power-on sent while %s is on the host", k)
			}
		}
		request := func(k string, mode power.Mode) {
			tk, err := clients[k].Request(ctx, name, mode)
			if err != nil {
				rt.Fatalf("request %s: %v", k, err)
			}
			open[k] = rebootcheck.Ticket{Ticket: tk, Real: clk.Real()}
		}
		release := func(k string) {
			if err := clients[k].Release(ctx, open[k].Ticket); err != nil {
				rt.Fatalf("release %s: %v", k, err)
			}
			delete(open, k)
		}
		rawRequest := func() {
			at := clk.Now()
			v := rawValue
			annotate(rawKey, &v)
			raw = &rebootcheck.Ticket{Ticket: reboot.Ticket{Host: name, Annotation: rawKey, Value: rawValue, At: at}, Real: clk.Real()}
		}
		rawRelease := func() {
			annotate(rawKey, nil)
			raw = nil
		}

		reconcile := func() {
			before := host()
			_, err := r.Reconcile(ctx, name)
			if err != nil && !errors.Is(err, reboot.ErrConflict) && !errors.Is(err, errInjected) && !errors.Is(err, rebootcheck.ErrCrash) {
				rt.Fatalf("reconcile: %v", err)
			}
			if probe.Crashed {
				probe.Crashed = false
				r = newReconciler()
			}
			after := host()
			if _, had := before.Annotations[reboot.Annotation]; had {
				if _, has := after.Annotations[reboot.Annotation]; !has && !pw.WasOffDuring(bareAt, clk.Real()) {
					rt.Fatalf("bare annotation (written at %v) removed, but the hardware has not been off since", bareAt)
				}
			}
			if after.Status.Pending() && !after.Status.PendingRebootSince.Equal(lastPending) {
				episodes++
				lastPending = after.Status.PendingRebootSince
			}
		}

		check := func() {
			h := host()
			now := clk.Now()
			if now.Before(lastWall) {
				backJumps += lastWall.Sub(now)
			}
			lastWall = now
			for _, k := range keys {
				_, onHost := h.Annotations[reboot.AnnotationPrefix+k]
				if _, inModel := open[k]; onHost != inModel {
					rt.Fatalf("annotation %s: on the host %v, its client thinks %v", k, onHost, inModel)
				}
			}
			if _, onHost := h.Annotations[rawKey]; onHost != (raw != nil) {
				rt.Fatalf("raw annotation: on the host %v, its client thinks %v", onHost, raw != nil)
			}
			if touched != "" && h.Annotations["example.com/touch"] != touched {
				rt.Fatalf("kubectl's annotation lost: %q, want %q", h.Annotations["example.com/touch"], touched)
			}
			if future != "" {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(bmhGVK)
				if err := direct.Get(ctx, key, u); err != nil {
					rt.Fatal(err)
				}
				if v, _, _ := unstructured.NestedString(u.Object, "spec", FutureField); v != future {
					rt.Fatalf("the other controller's spec.%s lost: %q, want %q", FutureField, v, future)
				}
			}
			if raw != nil && h.Status.Fenced(raw.At, now) && !pw.WasOffDuring(raw.Real.Add(-backJumps), clk.Real()) {
				rt.Fatalf("raw client told fenced for T=%v (real %v), but the hardware has run since; status %+v, truth %v",
					raw.At, raw.Real, h.Status, rebootcheck.DescribeTruth(pw))
			}
			for k, tk := range open {
				if reboot.FencedFor(h.Status, tk.Ticket, now) && !pw.WasOffDuring(tk.Real.Add(-backJumps), clk.Real()) {
					rt.Fatalf("client %s told fenced for T=%v (real %v), but the hardware has run since; status %+v, truth %v",
						k, tk.At, tk.Real, h.Status, rebootcheck.DescribeTruth(pw))
				}
			}
			if err := rebootcheck.CheckCycles(pw, episodes); err != nil {
				rt.Fatal(err)
			}
		}

		steps := rapid.IntRange(10, 60).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 17).Draw(rt, "action") {
			case 0, 1, 2, 3:
				reconcile()
			case 4:
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				if _, held := open[k]; !held {
					request(k, power.Mode(rapid.IntRange(0, 1).Draw(rt, "mode")))
				}
			case 5:
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				if _, held := open[k]; held {
					release(k)
				}
			case 6:
				v := rapid.SampledFrom([]string{"", `{"mode":"hard"}`, `{"mode":"soft"}`, "not json"}).Draw(rt, "value")
				annotate(reboot.Annotation, &v)
				if bareAt.IsZero() || !host().Status.Pending() {
					bareAt = clk.Real()
				}
			case 7:
				clk.Apply(fake.DrawClockMove(rt, "clock", true))
			case 8:
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(rt, "faultOp")
				k := rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout, fake.FaultUnsupported}).Draw(rt, "fault")
				pw.FailNext(op, fake.Fault{Kind: k, Applied: rapid.Bool().Draw(rt, "applied")})
			case 9:
				r = newReconciler() // a restart between two steps
			case 10:
				probe.CrashArmed = true // a crash after persisting, before the power call
			case 11:
				fc.armed, fc.record, fc.applied = true, rapid.Bool().Draw(rt, "faultOnRecord"), rapid.Bool().Draw(rt, "faultApplied")
			case 12:
				// A second writer between the controller's read and write.
				k := rapid.SampledFrom(keys).Draw(rt, "interloperKey")
				what := rapid.IntRange(0, 3).Draw(rt, "interloper")
				f := func() {
					switch _, held := open[k]; {
					case what == 0 && !held:
						request(k, power.ModeHard)
					case what == 1 && held:
						release(k)
					case what == 2:
						touch()
					default:
						setFutureField()
					}
				}
				if rapid.Bool().Draw(rt, "interloperAtRead") {
					probe.OnRead = f
				} else {
					hosts.before = f
				}
			case 13, 16, 17:
				switch rapid.IntRange(0, 4).Draw(rt, "kubeWorld") {
				case 0, 4:
					// A client forges the old place of the evidence: "off
					// just now".
					forged := fmt.Sprintf(`{"lastPoweredOff":%q,"pendingRebootSince":%q}`,
						clk.Now().Format(time.RFC3339Nano), clk.Now().Add(-time.Hour).Format(time.RFC3339Nano))
					annotate(LegacyStatusAnnotation, &forged)
				case 1:
					// The record is deleted under the controller (kubectl, or
					// a namespace clean-up racing it).
					err := direct.Delete(ctx, &v1alpha1.RebootRecord{ObjectMeta: newBMHRef(ns, name).ObjectMeta})
					if err != nil && !apierrors.IsNotFound(err) {
						rt.Fatal(err)
					}
				case 2:
					touch()
				default:
					setFutureField()
				}
			case 14:
				if rapid.IntRange(0, 3).Draw(rt, "oob") == 0 {
					pw.OutOfBandOff()
				} else {
					pw.OutOfBandOn()
				}
			case 15:
				switch {
				case raw == nil:
					rawRequest()
				case rapid.Bool().Draw(rt, "rawAgain"):
					rawRelease()
					rawRequest()
				default:
					rawRelease()
				}
			}
			check()
		}

		// Liveness: the world behaves from here on.
		hosts.before, probe.OnRead = nil, nil
		probe.CrashArmed, fc.armed = false, false
		pw.SetReport(fake.Report{})
		clk.Correct()
		lastWall = clk.Now()
		told := map[string]bool{}
		for k := range open {
			told[k] = false
		}
		if raw != nil {
			rawRelease()
			rawRequest()
		}
		rawTold := raw == nil
		converged := false
		for i := 0; i < 300 && !converged; i++ {
			if raw != nil && host().Status.Fenced(raw.At, clk.Now()) {
				if !pw.WasOffDuring(raw.Real.Add(-backJumps), clk.Real()) {
					rt.Fatalf("raw client told fenced for T=%v at the end, but the hardware has run since; truth %v", raw.At, rebootcheck.DescribeTruth(pw))
				}
				rawTold = true
				rawRelease()
			}
			for _, k := range keys {
				if tk, ok := open[k]; ok {
					f, err := clients[k].Fenced(ctx, tk.Ticket)
					if err != nil {
						rt.Fatalf("client %s: %v", k, err)
					}
					if f {
						if !pw.WasOffDuring(tk.Real.Add(-backJumps), clk.Real()) {
							rt.Fatalf("client %s told fenced for T=%v at the end, but the hardware has run since; truth %v", k, tk.At, rebootcheck.DescribeTruth(pw))
						}
						told[k] = true
						release(k)
					}
				}
			}
			reconcile()
			check()
			h := host()
			converged = len(open) == 0 && raw == nil && !h.Status.Pending() && pw.Current() == power.StateOn && !rebootcheck.HasValidReboot(h)
			clk.Advance(5 * time.Second)
			if !converged && i%10 == 9 {
				time.Sleep(10 * time.Millisecond) // let the cache catch up
			}
		}
		if h := host(); !converged {
			rt.Fatalf("did not converge: annotations %v, status %+v, power %v, open %v", h.Annotations, h.Status, pw.Current(), open)
		}
		if !rawTold {
			rt.Fatalf("the raw client released without ever being told fenced")
		}
		for k, f := range told {
			if !f {
				rt.Fatalf("client %s released without ever being told fenced", k)
			}
		}
	})
}

func jsonOf(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

func newBMHRef(ns, name string) *metal3.BareMetalHost {
	return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
