package kube

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// extChecks is how many cases TestExternalRemediationStateMachine draws
// in a quick run (each is a namespace, two controllers and a health
// checker on a real API server, for a few seconds of real time);
// extLongChecks with REBOOTKIT_LONG; -rapid.checks chooses.
const extChecks, extLongChecks = "3", "25"

// bmcFaults is a host's BMC's fault mode, asked by fake.PowerConfig.Faults
// (under the Power's lock): none, some calls refused (busy, failed, timed
// out; a refused command applied anyway half the time: a late-applied
// command), or dead (every call times out).
type bmcFaults struct {
	mu   sync.Mutex
	mode int // 0 none, 1 some, 2 dead
	rnd  *rand.Rand
}

const (
	bmcHealthy = iota
	bmcSome
	bmcDead
)

func (b *bmcFaults) fault(c fake.Call) fake.Fault {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.mode {
	case bmcDead:
		return fake.Fault{Kind: fake.FaultTimeout}
	case bmcSome:
		if b.rnd.IntN(100) < 30 {
			kinds := []fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}
			return fake.Fault{Kind: kinds[b.rnd.IntN(len(kinds))], Applied: b.rnd.IntN(2) == 0}
		}
	}
	return fake.Fault{}
}

func (b *bmcFaults) set(mode int) {
	b.mu.Lock()
	b.mode = mode
	b.mu.Unlock()
}

// extObserver reads every remediation directly (not through a cache)
// every few milliseconds and keeps, against ground truth:
//   - for each host, when some remediation of it was seen acting on it:
//     in flight (status.state's phase, remediation.InFlight), or ended
//     and still holding it (Processing True after an attempt);
//   - for each remediation, when it was first seen reporting Succeeded
//     False and Processing False (the checker escalates on it);
//   - violations: two remediations acting on one host at once (in
//     flight, or ended and still holding it: it keeps its admission, the
//     per-host lock, until it lets go of the host).
type extObserver struct {
	e  *extEnv
	mu sync.Mutex
	// inFlight: host -> times a remediation of it was seen acting on it
	// (in flight, or ended and still holding it).
	inFlight map[string][]sighting
	// released: remediation UID -> its first Succeeded False / Processing
	// False sighting.
	released   map[types.UID]sighting
	violations []string
}

type sighting struct {
	name, host string
	at         time.Time
}

func (o *extObserver) run() {
	for o.e.ctx.Err() == nil {
		o.poll()
		time.Sleep(15 * time.Millisecond)
	}
}

func (o *extObserver) poll() {
	before := time.Now()
	var l v1alpha1.PowerCycleRemediationList
	if err := o.e.direct.List(o.e.ctx, &l, client.InNamespace(o.e.ns)); err != nil {
		return
	}
	after := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	acting := map[string][]string{}
	for _, r := range l.Items {
		if r.Status.Host == "" {
			continue
		}
		var st remediation.State
		if r.Status.State != "" {
			if err := json.Unmarshal([]byte(r.Status.State), &st); err != nil {
				o.violations = append(o.violations, fmt.Sprintf("%s: status.state unreadable: %v", r.Name, err))
				continue
			}
		}
		// Acting on its host: an attempt in flight, or one that ended and
		// still holds the host (Processing True: the reboot controller may
		// still power it off or on for it).
		if remediation.InFlight(st.Phase) ||
			st.Phase != remediation.PhaseNone && meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionProcessing) {
			acting[r.Status.Host] = append(acting[r.Status.Host], r.Name)
			// In flight at some instant of [before, after]: before excuses
			// the most.
			o.inFlight[r.Status.Host] = append(o.inFlight[r.Status.Host], sighting{name: r.Name, host: r.Status.Host, at: before})
		}
		if _, seen := o.released[r.UID]; !seen &&
			meta.IsStatusConditionFalse(r.Status.Conditions, v1alpha1.ConditionSucceeded) &&
			meta.IsStatusConditionFalse(r.Status.Conditions, v1alpha1.ConditionProcessing) {
			// Reported at some instant before after: a power command later
			// than that is surely after the report.
			o.released[r.UID] = sighting{name: r.Name, host: r.Status.Host, at: after}
		}
	}
	if n := o.e.limit.Of(len(o.e.hw)); len(acting) > n {
		o.violations = append(o.violations, fmt.Sprintf("(d) %s: %d hosts with a remediation acting on them at once (%v), storm guard limit %d",
			before.Format("15:04:05.000"), len(acting), acting, n))
	}
	held := 0
	for h := range o.e.hw {
		bmh := newBMHRef(o.e.ns, h)
		if err := o.e.direct.Get(o.e.ctx, clientKey(bmh), bmh); err == nil {
			if _, ok := bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey]; ok {
				held++
			}
		}
	}
	if n := o.e.limit.Of(len(o.e.hw)); held > n {
		o.violations = append(o.violations, fmt.Sprintf("(d) %s: %d hosts carry a remediation's reboot request at once, storm guard limit %d",
			before.Format("15:04:05.000"), held, n))
	}
	for h, names := range acting {
		if len(names) > 1 {
			o.violations = append(o.violations, fmt.Sprintf("%s: host %s acted on by %d remediations at once: %v",
				before.Format("15:04:05.000"), h, len(names), names))
		}
	}
}

// releaseSlack is how long after a power command a remediation of the
// host may first be seen in flight and still excuse it (the observer's
// poll and the phase write racing the reboot controller).
const releaseSlack = 500 * time.Millisecond

// powerAfterRelease lists the power commands sent to a host after one of
// its remediations reported Succeeded False / Processing False, that no
// remediation of the host seen in flight since accounts for.
func (o *extObserver) powerAfterRelease() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, rel := range o.released {
		for _, c := range o.e.hw[rel.host].Calls() {
			if c.Op == fake.OpState || !c.At.After(rel.at) {
				continue
			}
			excused := slices.ContainsFunc(o.inFlight[rel.host], func(s sighting) bool {
				return !s.at.Before(rel.at) && !s.at.After(c.At.Add(releaseSlack))
			})
			if !excused && time.Since(c.At) > releaseSlack {
				out = append(out, fmt.Sprintf("%s %s sent to host %s at %s, after %s reported Succeeded False / Processing False at %s",
					c.Op, c.Mode, rel.host, c.At.Format("15:04:05.000"), rel.name, rel.at.Format("15:04:05.000")))
			}
		}
	}
	return out
}

func (o *extObserver) takeViolations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.violations)
}

// offAtOnce is the most hosts off at one instant so far (ground truth, at
// every change of any host's power).
func offAtOnce(e *extEnv, hosts []string) (int, time.Time) {
	most, when := 0, time.Time{}
	for _, h := range hosts {
		for _, tc := range e.hw[h].Truth() {
			off := 0
			for _, g := range hosts {
				if !e.hw[g].WasOnAt(tc.At) {
					off++
				}
			}
			if off > most {
				most, when = off, tc.At
			}
		}
	}
	return most, when
}

// TestExternalRemediationStateMachine is the external remediation
// controller and the reboot controller it drives, on the API server
// under the generated RBAC, with a health checker (medik8s
// NodeHealthCheck, with or without escalation to another remediator on
// a timeout, or Cluster API's MachineHealthCheck, driven as their code
// does it) and a second checker making a second remediation of a host.
// Its steps, drawn at random: a Node hangs (NotReady until its host is
// power-cycled) or recovers on its own; the checker deletes a remediation
// mid-way; a second remediation for a host; a BMC that refuses some or
// all calls (busy, failed, timed out, applied anyway), lies (stale and
// flapping reads up to the stale-read window, never Transitioning,
// unknown, Off before the hardware is off up to the off-settle time) or
// lags; one-shot BMC faults; a restart of both controllers; time passing.
// The checker creates remediations from the template and escalates on
// its own timeout (NodeHealthCheck's escalatingRemediations), all the
// time.
//
// Checked against ground truth (the fake powers' timelines and call
// logs, direct API reads) after every step:
//   - (a) a Node is deleted or tainted out-of-service only while its host
//     is off (OffThroughout the whole call);
//   - (b) after a remediation reports Succeeded False and Processing False
//     (the checker moves on), no power command reaches its host unless a
//     remediation of that host (another checker's, or a new one) is seen
//     acting on it (in flight, or ended and still holding it);
//   - (c) no two remediations acting on one host at once (in flight, or
//     ended and still holding it);
//   - (d) no more hosts off at once than the storm guard's limit (the
//     fake powers), nor more with a remediation in flight or carrying the
//     remediation's reboot request (direct reads).
//
// Then (e) liveness with the faults the design must survive kept on (a
// BMC that refuses some calls, stale, flapping and unknown reads; a dead
// BMC comes back): Nodes over the limit recover on their own, and within
// a bound every remediation is terminal (Succeeded True, or False with
// Processing False) or gone, none in flight, no reboot request left on a
// host, and every host runs.
func TestExternalRemediationStateMachine(t *testing.T) {
	needAPIServer(t)
	if !rapidChecksGiven() {
		was := flag.Lookup("rapid.checks").Value.String()
		n := extChecks
		if v := os.Getenv(rapidcheck.LongEnv); v != "" && v != "0" {
			n = extLongChecks
		}
		if err := flag.Set("rapid.checks", n); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = flag.Set("rapid.checks", was) }()
	}
	rapidcheck.Check(t, func(rt *rapid.T) {
		const staleReads, offSettle = 500 * time.Millisecond, 300 * time.Millisecond
		caseStart := time.Now()
		nHosts := rapid.IntRange(2, 3).Draw(rt, "hosts")
		var hosts []string
		for i := range nHosts {
			hosts = append(hosts, fmt.Sprintf("h%d", i))
		}
		limit := rapid.IntRange(1, nHosts).Draw(rt, "limit")
		e := newExtEnvWith(t, hosts, remediation.MaxCount(limit),
			reboot.Config{StaleReads: staleReads, OffSettle: offSettle, SoftTimeout: time.Second,
				RetryDelay: 300 * time.Millisecond, PollInterval: 500 * time.Millisecond, QuickPoll: 200 * time.Millisecond, ReissueAfter: 3 * time.Second})
		defer e.stop()

		// The BMCs.
		faults := map[string]*bmcFaults{}
		cfgs := map[string]fake.PowerConfig{}
		for _, h := range hosts {
			faults[h] = &bmcFaults{rnd: rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "faultSeed"), 1))}
			cfgs[h] = fake.PowerConfig{Lag: time.Duration(rapid.Int64Range(0, int64(400*time.Millisecond)).Draw(rt, "lag")),
				Faults: faults[h].fault}
			e.hw[h].SetConfig(cfgs[h])
		}
		drawReport := func() fake.Report {
			var r fake.Report
			if rapid.Bool().Draw(rt, "stale") {
				r.Stale = time.Duration(rapid.Int64Range(int64(50*time.Millisecond), int64(staleReads)).Draw(rt, "staleFor"))
				r.Flap = rapid.Bool().Draw(rt, "flap")
			}
			r.NoTransitioning = rapid.Bool().Draw(rt, "noTransitioning")
			if rapid.Bool().Draw(rt, "unknown") {
				r.Unknown = float64(rapid.IntRange(1, 25).Draw(rt, "unknownPercent")) / 100
			}
			if rapid.Bool().Draw(rt, "early") {
				r.EarlyOff = time.Duration(rapid.Int64Range(int64(50*time.Millisecond), int64(offSettle)).Draw(rt, "earlyOff"))
			}
			r.Seed = rapid.Uint64().Draw(rt, "reportSeed")
			return r
		}

		// The template and the checker.
		spec := workerSpec(time.Duration(rapid.Int64Range(int64(2*time.Second), int64(5*time.Second)).Draw(rt, "timeout")))
		retry := int32(rapid.IntRange(0, 1).Draw(rt, "retryLimit"))
		spec.RetryLimit = &retry
		if rapid.Bool().Draw(rt, "outOfService") {
			spec.Strategy = v1alpha1.StrategyOutOfServiceTaint
		}
		if rapid.IntRange(0, 3).Draw(rt, "soft") == 0 {
			spec.Mode = "soft"
		}
		e.template("pc", spec)
		checkerKind := rapid.SampledFrom([]string{"nhc", "nhc-escalating", "mhc"}).Draw(rt, "checker")
		var nhc *nhcDriver
		switch checkerKind {
		case "mhc":
			for i, h := range hosts {
				m := fmt.Sprintf("m%d", i)
				bmh := newBMHRef(e.ns, h)
				if err := e.direct.Get(e.ctx, clientKey(bmh), bmh); err != nil {
					rt.Fatal(err)
				}
				bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: m + "-m3m", Namespace: e.ns}
				if err := e.direct.Update(e.ctx, bmh); err != nil {
					rt.Fatal(err)
				}
				mm := newMachine(t, e.direct, e.ns, m, false)
				mm.Status.NodeRef = clusterv1.MachineNodeReference{Name: e.nodeOf[h]}
				if err := e.direct.Status().Update(e.ctx, mm); err != nil {
					rt.Fatal(err)
				}
			}
			go (&mhcDriver{e: e, template: "pc", seen: map[string]time.Time{}}).run()
		default:
			var nodes []string
			for _, h := range hosts {
				nodes = append(nodes, e.nodeOf[h])
			}
			steps := []nhcStep{{template: "pc", timeout: spec.Timeout.Duration + time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "nhcTimeoutExtra"))}}
			if checkerKind == "nhc-escalating" {
				steps = append(steps, nhcStep{}) // the next remediator
			}
			nhc = newNHC(e, time.Duration(rapid.Int64Range(0, int64(300*time.Millisecond)).Draw(rt, "unhealthy")), nodes, steps...)
			go nhc.run()
		}

		obs := &extObserver{e: e, inFlight: map[string][]sighting{}, released: map[types.UID]sighting{}}
		go obs.run()

		var log []string
		logf := func(format string, args ...any) {
			log = append(log, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
		}
		escalations := func() string {
			if nhc == nil {
				return ""
			}
			var b strings.Builder
			for _, h := range hosts {
				if to, next := nhc.times(e.nodeOf[h]); !to.IsZero() {
					fmt.Fprintf(&b, "NHC escalated %s (timed out or failed) at %s, next remediator at %s\n", h, to.Format("15:04:05.000"), next.Format("15:04:05.000"))
				}
			}
			return b.String()
		}
		fail := func(format string, args ...any) {
			obs.poll()
			rt.Fatalf("%s\nsteps:\n%s\n%s%s", fmt.Sprintf(format, args...), strings.Join(log, "\n"), escalations(), e.dump())
		}
		check := func() {
			obs.poll()
			if _, whileOn := e.fc.counts(); len(whileOn) > 0 {
				fail("(a) a Node deleted or tainted while its host ran (ground truth): %v", whileOn)
			}
			if v := obs.powerAfterRelease(); len(v) > 0 {
				fail("(b) power commands after a remediation let go (ground truth, the BMC's call log): %v", v)
			}
			if v := obs.takeViolations(); len(v) > 0 {
				fail("(c)/(d) %v", v)
			}
			if most, at := offAtOnce(e, hosts); most > limit {
				fail("(d) %d hosts off at once at %s (ground truth), storm guard limit %d", most, at.Format("15:04:05.000"), limit)
			}
		}

		// Second remediations of a host, made by another checker.
		var extra []string
		pickHost := func() string { return rapid.SampledFrom(hosts).Draw(rt, "host") }
		steps := rapid.IntRange(4, 12).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 11).Draw(rt, "action") {
			case 0, 1:
				h := pickHost()
				e.hang(h)
				logf("node of %s hangs (NotReady)", h)
			case 2:
				h := pickHost()
				e.mu.Lock()
				delete(e.hung, e.nodeOf[h])
				e.mu.Unlock()
				e.setReady(h, true)
				logf("node of %s recovers on its own", h)
			case 3:
				var l v1alpha1.PowerCycleRemediationList
				if err := e.direct.List(e.ctx, &l, client.InNamespace(e.ns)); err != nil || len(l.Items) == 0 {
					continue
				}
				r := l.Items[rapid.IntRange(0, len(l.Items)-1).Draw(rt, "which")]
				if err := e.checker.Delete(e.ctx, &r); err != nil && !apierrors.IsNotFound(err) {
					fail("checker delete: %v", err)
				}
				logf("checker deletes %s mid-way (phase %q)", r.Name, r.Status.Phase)
			case 4:
				h := pickHost()
				name := fmt.Sprintf("%s-second-%d", e.nodeOf[h], len(extra))
				f := false
				r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name,
					Annotations:     map[string]string{v1alpha1.NodeNameAnnotation: e.nodeOf[h]},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "remediation.medik8s.io/v1alpha1", Kind: "NodeHealthCheck", Name: "other", UID: "uid-other", Controller: &f}}},
					Spec: spec}
				if err := e.checker.Create(e.ctx, r); err != nil {
					fail("second remediation: %v", err)
				}
				extra = append(extra, name)
				logf("a second checker creates %s for %s", name, h)
			case 5:
				h := pickHost()
				mode := rapid.IntRange(bmcHealthy, bmcDead).Draw(rt, "bmcMode")
				faults[h].set(mode)
				logf("BMC of %s: fault mode %d", h, mode)
			case 6:
				h := pickHost()
				rep := fake.Report{}
				if rapid.Bool().Draw(rt, "lies") {
					rep = drawReport()
				}
				cfgs[h] = fake.PowerConfig{Lag: cfgs[h].Lag, Faults: cfgs[h].Faults, Report: rep}
				e.hw[h].SetConfig(cfgs[h])
				logf("BMC of %s reports %+v", h, rep)
			case 7:
				h := pickHost()
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(rt, "faultOp")
				k := rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout, fake.FaultUnsupported}).Draw(rt, "fault")
				applied := rapid.Bool().Draw(rt, "applied")
				e.hw[h].FailNext(op, fake.Fault{Kind: k, Applied: applied})
				logf("BMC of %s: next %s fails %s (applied %v)", h, op, k, applied)
			case 8:
				e.restart()
				logf("controllers restarted")
			default:
				d := time.Duration(rapid.Int64Range(int64(50*time.Millisecond), int64(time.Second)).Draw(rt, "wait"))
				time.Sleep(d)
				logf("%s pass", d)
			}
			check()
		}

		// Liveness, with the faults the design must survive kept on: a
		// dead BMC comes back refusing only some calls; lies stay.
		for _, h := range hosts {
			faults[h].mu.Lock()
			if faults[h].mode == bmcDead {
				faults[h].mode = bmcSome
			}
			faults[h].mu.Unlock()
		}
		// Nodes over the storm guard's limit recover on their own (the
		// guard holds every remediation while more are unhealthy).
		for _, h := range hosts[limit:] {
			e.mu.Lock()
			_, hung := e.hung[e.nodeOf[h]]
			delete(e.hung, e.nodeOf[h])
			e.mu.Unlock()
			if hung {
				e.setReady(h, true)
			}
		}
		logf("liveness: faults that must be survived kept on; nodes of %v recover", hosts[limit:])
		const bound = 60 * time.Second
		deadline := time.Now().Add(bound)
		for {
			check()
			var l v1alpha1.PowerCycleRemediationList
			if err := e.direct.List(e.ctx, &l, client.InNamespace(e.ns)); err != nil {
				fail("list: %v", err)
			}
			settled := true
			var why []string
			for _, r := range l.Items {
				// The second checker deletes its remediations once their
				// Node is Ready, as a checker does.
				if slices.Contains(extra, r.Name) && r.DeletionTimestamp == nil {
					if _, ready := e.nodeReady(hostOfNode(e, r.Annotations[v1alpha1.NodeNameAnnotation])); ready {
						_ = e.checker.Delete(e.ctx, &r)
					}
				}
				var st remediation.State
				_ = json.Unmarshal([]byte(r.Status.State), &st)
				terminal := condition(&r, v1alpha1.ConditionSucceeded) == metav1.ConditionTrue ||
					condition(&r, v1alpha1.ConditionSucceeded) == metav1.ConditionFalse && condition(&r, v1alpha1.ConditionProcessing) == metav1.ConditionFalse
				if !terminal || remediation.InFlight(st.Phase) {
					settled = false
					why = append(why, r.Name+" not terminal")
				}
			}
			gaveUp := map[string]bool{}
			for _, r := range l.Items {
				if condition(&r, v1alpha1.ConditionSucceeded) == metav1.ConditionFalse && condition(&r, v1alpha1.ConditionProcessing) == metav1.ConditionFalse {
					gaveUp[r.Status.Host] = true
				}
			}
			for _, h := range hosts {
				if nhc != nil {
					if to, _ := nhc.times(e.nodeOf[h]); !to.IsZero() {
						gaveUp[h] = true
					}
				}
				// A hung Node is remediated (Ready again) unless its checker
				// gave up on rebootkit (escalated, or a failed remediation).
				if _, ready := e.nodeReady(h); !ready && !gaveUp[h] {
					settled = false
					why = append(why, "node of "+h+" not Ready and not given up on")
				}
				if !e.hw[h].HardwareOn() {
					settled = false
					why = append(why, h+" off")
				}
				if e.held(h) {
					settled = false
					why = append(why, h+" still carries the reboot request")
				}
			}
			if settled {
				break
			}
			if time.Now().After(deadline) {
				fail("(e) not settled within %s with survivable faults on: %v", bound, why)
			}
			time.Sleep(100 * time.Millisecond)
		}
		check()
		t.Logf("case: %s, %d hosts, limit %d, %d steps, settled %s after the steps, %s in all",
			checkerKind, nHosts, limit, steps, time.Since(deadline.Add(-bound)).Round(time.Millisecond), time.Since(caseStart).Round(time.Millisecond))
	})
}

// hostOfNode is the host whose Node is node ("" if none).
func hostOfNode(e *extEnv, node string) string {
	for h, n := range e.nodeOf {
		if n == node {
			return h
		}
	}
	return ""
}
