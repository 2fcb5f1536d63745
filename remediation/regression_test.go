package remediation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// Issue 12, case 1: behind a BMC that reports the previous state for
// seconds after a reset, the Node of a running host is never deleted. The
// old decision deleted it on an instantaneous Off reading: right after a
// reboot's power-on, the BMC still said Off.
func TestRegressionNodeNotDeletedOnStaleOff(t *testing.T) {
	for _, taint := range []bool{false, true} {
		s := newSimWith(1, remediation.Config{OutOfService: taint}, false, remediation.MaxCount(1), func(int) fake.PowerConfig {
			return fake.PowerConfig{Lag: time.Second, Report: fake.Report{Stale: 15 * time.Second, NoTransitioning: true}}
		})
		s.mhcOff["m0"] = true
		s.cluster.BeforeNodeFence = func(node string) {
			if s.powers["h0"].HardwareOn() {
				t.Fatalf("node %s deleted or tainted while its host runs (ground truth)", node)
			}
		}
		for i := 0; i < 10; i++ {
			s.step(5 * time.Second) // the controllers have been up a while
		}
		// Someone reboots the host; right after its power-on, while the BMC
		// still reports Off, the machine is marked for remediation.
		require.NoError(t, s.hosts.Mutate("h0", func(h *reboot.Host) { h.Annotations[reboot.Annotation] = "" }))
		for i := 0; i < 400 && s.powers["h0"].Cycles() == 0; i++ {
			s.step(250 * time.Millisecond)
		}
		require.Equal(t, 1, s.powers["h0"].Cycles())
		require.Equal(t, power.StateOff, mustState(t, s.powers["h0"]), "the BMC still echoes Off")
		s.cluster.SetNeedsRemediation("m0", true)
		for i := 0; i < 400; i++ {
			s.step(250 * time.Millisecond)
		}
		rec, err := s.cluster.Get(s.ctx, "m0")
		require.NoError(t, err)
		assert.Equal(t, remediation.PhaseDone, rec.State.Phase, "taint=%v: %s", taint, describeSim(s))
	}
}

func mustState(t *testing.T, p *fake.Power) power.State {
	t.Helper()
	st, err := p.State(context.Background())
	require.NoError(t, err)
	return st
}

// Issue 12, case 2: two reconciles running at once (MaxConcurrentReconciles
// > 1) never admit two control-plane remediations. The old guard computed
// MayStart from a List and wrote only the candidate's own record.
func TestRegressionAdmissionIsAtomic(t *testing.T) {
	for round := 0; round < 50; round++ {
		s := newSim(3, remediation.Config{}, false, remediation.MaxPercent(100))
		for _, m := range []string{"m0", "m1", "m2"} {
			s.cluster.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: "n" + m[1:], ControlPlane: true})
			s.cluster.SetNeedsRemediation(m, true)
		}
		// Truly concurrent reconciles: two workers of one Reconciler and a
		// second Reconciler (another process).
		s.cluster.SetInterloper(nil)
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for i, m := range []string{"m0", "m1", "m2"} {
			r := s.rem
			if i == 2 {
				r = s.rem2
			}
			wg.Add(1)
			go func(r *remediation.Reconciler, m string) {
				defer wg.Done()
				if _, err := r.Reconcile(s.ctx, m); err != nil && !errors.Is(err, remediation.ErrConflict) {
					errs <- err
				}
			}(r, m)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		recs, _ := s.cluster.List(s.ctx)
		inFlight := 0
		for _, r := range recs {
			if remediation.InFlight(r.State.Phase) {
				inFlight++
			}
		}
		require.LessOrEqual(t, inFlight, 1, "round %d: %d control-plane remediations admitted at once", round, inFlight)
		adm, _ := s.cluster.GetAdmissions(s.ctx)
		require.LessOrEqual(t, len(adm.Machines), 1)
	}
}

// Issue 12, case 3: every end state removes our out-of-service taint and
// restores the backed-up labels on the Node that comes back: failed with no
// owner, and cancelled after the node was fenced. The old code did it only
// in the waiting-for-node phase.
func TestRegressionEndStatesCleanUp(t *testing.T) {
	cfg := remediation.Config{OutOfService: true, Timeout: time.Minute, RetryLimit: -1}
	node := remediation.Node{Exists: true, Name: "n0", Ready: false, Labels: map[string]string{"rack": "r7"}}
	o := remediation.Observed{Machine: remediation.Machine{Name: "m0", UID: "u", NeedsRemediation: true, NodeName: "n0"},
		Node: node, MayStart: true}
	now := fake.Epoch
	apply := func(d remediation.Decision) {
		o.State = d.State
		o.Admitted = (o.Admitted || d.Admit) && !d.Release
		if d.AddRebootAnnotation {
			o.Host = remediation.Host{RebootAnnotation: true, Requested: true, Fenced: true}
		}
		if d.RemoveRebootAnnotation {
			o.Host = remediation.Host{PoweredOn: true}
		}
		if d.TaintNode {
			o.Node.OutOfService = true
		}
		if d.RemoveTaint {
			o.Node.OutOfService = false
		}
		for k, v := range d.RestoreLabels {
			o.Node.Labels[k] = v
		}
	}
	// Failed: the node never comes back Ready, there is no owner.
	for i := 0; i < 20 && o.State.Phase != remediation.PhaseFailed; i++ {
		if o.State.Phase == remediation.PhaseWaitingForNode {
			o.Node.Labels = map[string]string{"fresh": "x"} // the kubelet re-registered, NotReady
		}
		apply(cfg.Decide(o, now))
		now = now.Add(40 * time.Second)
	}
	require.Equal(t, remediation.PhaseFailed, o.State.Phase)
	for i := 0; i < 3; i++ {
		apply(cfg.Decide(o, now))
	}
	assert.False(t, o.Node.OutOfService, "failed remediation left the node tainted")
	assert.Equal(t, "r7", o.Node.Labels["rack"], "failed remediation dropped the backed-up labels")
	assert.Nil(t, o.State.Backup)
	assert.Contains(t, o.State.Message, "retries exhausted")

	// Cancelled after the node was fenced, and the node is gone for now:
	// the state says why the labels wait, and they are restored when it
	// returns, after the remediation ended.
	cfg.OutOfService = false
	o = remediation.Observed{Machine: remediation.Machine{Name: "m0", UID: "u", NeedsRemediation: true, NodeName: "n0"},
		Node: remediation.Node{Exists: true, Name: "n0", Labels: map[string]string{"rack": "r7"}}, MayStart: true}
	apply(cfg.Decide(o, now)) // power-off requested
	d := cfg.Decide(o, now)   // fenced: delete the node
	require.True(t, d.DeleteNode)
	apply(d)
	o.Node = remediation.Node{Name: "n0"}
	o.Machine.NeedsRemediation = false // cancelled
	for i := 0; i < 10 && remediation.InFlight(o.State.Phase); i++ {
		now = now.Add(2 * time.Minute)
		apply(cfg.Decide(o, now))
	}
	require.Equal(t, remediation.PhaseDone, o.State.Phase)
	require.NotNil(t, o.State.Backup)
	apply(cfg.Decide(o, now))
	assert.Contains(t, o.State.Message, "node not back")
	o.Node = remediation.Node{Exists: true, Name: "n0", Ready: true, Labels: map[string]string{"fresh": "x"}}
	d = cfg.Decide(o, now)
	assert.Equal(t, map[string]string{"rack": "r7"}, d.RestoreLabels, "labels restored after the end")
	apply(d)
	apply(cfg.Decide(o, now))
	assert.Nil(t, o.State.Backup)
}

// flapWorld drives one Machine through Decide with a cooperative reboot
// controller and kubelet, and counts power cycles.
type flapWorld struct {
	cfg    remediation.Config
	o      remediation.Observed
	now    time.Time
	cycles int
	fixed  bool // a power cycle fixes the node
}

func (w *flapWorld) pass() remediation.Decision {
	d := w.cfg.Decide(w.o, w.now)
	w.o.State = d.State
	w.o.Admitted = (w.o.Admitted || d.Admit) && !d.Release
	if d.AddRebootAnnotation {
		w.o.Host = remediation.Host{RebootAnnotation: true, Requested: true, Fenced: true}
	}
	if d.DeleteNode {
		w.o.Node = remediation.Node{Name: "n0"}
	}
	if d.RemoveRebootAnnotation && w.o.Host.RebootAnnotation {
		w.o.Host = remediation.Host{PoweredOn: true}
		w.cycles++
		w.o.Node = remediation.Node{Exists: true, Name: "n0", Ready: w.fixed}
	}
	if d.RemoveNeedsRemediation {
		w.o.Machine.NeedsRemediation = false
	}
	w.now = w.now.Add(30 * time.Second)
	return d
}

// Issue 12, case 4: a storm-guard delay longer than the timeout does not
// reset the retry budget. The old code computed the attempt when it
// started, so every delayed attempt was attempt 1 and a node that fails
// after every power cycle was power-cycled forever.
func TestRegressionGuardDelayKeepsRetryBudget(t *testing.T) {
	// The node comes back Ready after every power cycle, and fails again.
	w := &flapWorld{cfg: remediation.Config{RetryLimit: 1, Timeout: 5 * time.Minute}, now: fake.Epoch, fixed: true,
		o: remediation.Observed{Machine: remediation.Machine{Name: "m0", UID: "u", NeedsRemediation: true, NodeName: "n0"},
			Node: remediation.Node{Exists: true, Name: "n0"}, MayStart: true}}
	for i := 0; i < 400 && w.o.State.Phase != remediation.PhaseFailed; i++ {
		if w.o.State.Phase == remediation.PhaseDone && !w.o.Machine.NeedsRemediation {
			// Unhealthy again; the storm guard holds it back for 20 minutes.
			w.o.Machine.NeedsRemediation = true
			w.o.MayStart = false
			for j := 0; j < 40; j++ {
				w.pass()
			}
			w.o.MayStart = true
		}
		w.pass()
	}
	assert.Equal(t, remediation.PhaseFailed, w.o.State.Phase, "never escalated")
	assert.LessOrEqual(t, w.cycles, 2, "power cycles with RetryLimit 1")
}

// Issue 12, case 5: a health checker that re-adds its annotation right
// after success (a stale view) costs at most RetryLimit+1 power cycles
// before escalation; the old phased mode power-cycled again, and a second
// re-add deleted the Machine.
func TestRegressionFlappingHealthChecker(t *testing.T) {
	for _, retries := range []int{-1, 1, 2} {
		w := &flapWorld{cfg: remediation.Config{RetryLimit: retries}, now: fake.Epoch, fixed: true,
			o: remediation.Observed{Machine: remediation.Machine{Name: "m0", UID: "u", NeedsRemediation: true, NodeName: "n0",
				HasControllerOwner: true}, Node: remediation.Node{Exists: true, Name: "n0"}, MayStart: true}}
		deleted := false
		for i := 0; i < 500 && !deleted; i++ {
			if w.o.State.Phase == remediation.PhaseDone && !w.o.Machine.NeedsRemediation {
				// Re-added after success: seconds later, or after 15 minutes
				// (longer than the attempt timeout, shorter than
				// MinHealthyPeriod).
				if i%2 == 0 {
					w.now = w.now.Add(15 * time.Minute)
				}
				w.o.Machine.NeedsRemediation = true
			}
			deleted = w.pass().DeleteMachine
		}
		limit := retries
		if limit == 0 {
			limit = 1
		} else if limit < 0 {
			limit = 0
		}
		assert.True(t, deleted, "retries %d: never escalated", retries)
		assert.LessOrEqual(t, w.cycles, limit+1, "retries %d", retries)
	}

	// A machine healthy for longer than MinHealthyPeriod starts afresh.
	w := &flapWorld{cfg: remediation.Config{RetryLimit: -1, MinHealthyPeriod: time.Hour}, now: fake.Epoch, fixed: true,
		o: remediation.Observed{Machine: remediation.Machine{Name: "m0", UID: "u", NeedsRemediation: true, NodeName: "n0"},
			Node: remediation.Node{Exists: true, Name: "n0"}, MayStart: true}}
	for i := 0; i < 50 && w.o.State.Phase != remediation.PhaseDone; i++ {
		w.pass()
	}
	require.Equal(t, remediation.PhaseDone, w.o.State.Phase)
	w.now = w.now.Add(2 * time.Hour)
	w.o.Machine.NeedsRemediation = true
	d := w.pass()
	assert.True(t, d.AddRebootAnnotation, "a new remediation after a healthy period: %s", d.Reason)
	assert.Equal(t, 1, d.State.Attempt)
}

// Issue 12, case 6: the reboot annotation value is always JSON, whatever
// bytes the Machine UID holds (the old code used %q, which wrote Go
// escapes the reboot controller read as a soft request).
func TestRegressionRebootValueIsJSON(t *testing.T) {
	for _, uid := range []string{"6b7c", "\x00\x01\x7f", "\xff\xfe", "a\"b\\c", "\u2028"} {
		checkRebootValue(t, uid, fake.Epoch.Add(1500*time.Millisecond))
	}
}

func FuzzRebootValue(f *testing.F) {
	for _, s := range []string{"", "uid", "\x00", "\xff", `"`} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, uid string, ns int64) {
		checkRebootValue(t, uid, time.Unix(0, ns))
	})
}

func checkRebootValue(t *testing.T, uid string, at time.Time) {
	t.Helper()
	v := remediation.RebootValue(uid, at)
	if !json.Valid([]byte(v)) {
		t.Fatalf("not JSON: %q", v)
	}
	if err := reboot.Validate(remediation.RebootAnnotation, v); err != nil {
		t.Fatalf("the reboot API rejects %q: %v", v, err)
	}
	reqs, warns := reboot.ParseAnnotations(map[string]string{remediation.RebootAnnotation: v}, reboot.Policy{})
	if len(warns) > 0 || len(reqs) != 1 || reqs[0].Mode != power.ModeHard {
		t.Fatalf("%q parsed as %+v, %v: want one hard request", v, reqs, warns)
	}
	var body struct{ Machine string }
	if err := json.Unmarshal([]byte(v), &body); err != nil {
		t.Fatal(err)
	}
	if want := perByteValidUTF8(uid); body.Machine != want {
		t.Fatalf("machine %q round-trips as %q", want, body.Machine)
	}
}

// perByteValidUTF8 replaces every byte of an invalid UTF-8 sequence with
// U+FFFD, as encoding/json does.
func perByteValidUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Issue 12, case 7: the storm guard's refusal says why, with the
// arithmetic, in the Machine's persisted state (40% of 3 machines is 1,
// rounded down as Cluster API does; CAPM3 #2055).
func TestRegressionGuardRefusalSaysWhy(t *testing.T) {
	fleet := []remediation.FleetMachine{{Name: "a", Unhealthy: true}, {Name: "b", Unhealthy: true}, {Name: "c"}}
	may, why := remediation.MayStart(fleet, "a", remediation.MaxPercent(40))
	require.False(t, may)
	assert.Equal(t, "2 of 3 machines unhealthy, more than the limit 40% (1)", why)
	d := remediation.Config{}.Decide(remediation.Observed{
		Machine: remediation.Machine{Name: "a", NeedsRemediation: true}, MayStart: may, GuardReason: why}, fake.Epoch)
	assert.True(t, d.UpdateState)
	assert.Equal(t, "storm guard: "+why, d.State.Message)
	d2 := remediation.Config{}.Decide(remediation.Observed{
		Machine: remediation.Machine{Name: "a", NeedsRemediation: true}, State: d.State, MayStart: may, GuardReason: why}, fake.Epoch.Add(time.Minute))
	assert.False(t, d2.UpdateState, "the same refusal is not written again")
}

// Issue 28, A4: a remediation whose host disappears (BareMetalHost deleted
// or consumerRef cleared) times out and escalates, at every in-flight
// phase, and never asks a missing host for anything; a Machine whose host
// is missing at the start waits for it until the timeout too. The old
// Reconciler returned before Decide, where the timeout lives.
func TestRegressionHostMissingEscalates(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	cfg := remediation.Config{Timeout: time.Minute}
	m := remediation.Machine{Name: "m", UID: "u", NeedsRemediation: true, HasControllerOwner: true, NodeName: "n"}
	for _, ph := range []remediation.Phase{remediation.PhasePowerOffRequested, remediation.PhaseNodeDeleted,
		remediation.PhasePoweringOn, remediation.PhaseWaitingForNode} {
		o := remediation.Observed{Machine: m, Node: remediation.Node{Exists: true, Name: "n"}, Admitted: true,
			Host:  remediation.Host{Missing: true, Power: power.StateUnknown},
			State: remediation.State{Phase: ph, Attempt: 1, Started: t0, RequestedAt: t0}}
		d := cfg.Decide(o, t0.Add(30*time.Second))
		assert.False(t, d.AddRebootAnnotation || d.DeleteNode || d.DeleteMachine, "%s: before the timeout: wait (%s)", ph, d.Reason)
		d = cfg.Decide(o, t0.Add(time.Minute))
		assert.True(t, d.DeleteMachine, "%s: escalates at the timeout (%s)", ph, d.Reason)
		assert.True(t, d.Release, "%s: releases its admission", ph)
		assert.False(t, d.AddRebootAnnotation, "%s: no request to a missing host", ph)
		assert.Equal(t, remediation.PhaseFailed, d.State.Phase)
	}
	// Missing at the start: the attempt starts (its timeout runs) without a
	// request.
	d := cfg.Decide(remediation.Observed{Machine: m, Host: remediation.Host{Missing: true}, MayStart: true}, t0)
	assert.Equal(t, remediation.PhasePowerOffRequested, d.State.Phase)
	assert.False(t, d.AddRebootAnnotation)
}

// Issue 28, B9: the storm guard counts per cluster and per health check
// (Cluster API's maxUnhealthy is per MachineHealthCheck), and "one
// control-plane machine at a time" is per cluster. The old guard counted
// the whole namespace: a remediation in one cluster blocked every other.
func TestRegressionGuardPerClusterAndHealthCheck(t *testing.T) {
	fleet := []remediation.FleetMachine{
		{Name: "a-w1", Cluster: "a", HealthCheck: "a-workers", Remediating: true},
		{Name: "a-w2", Cluster: "a", HealthCheck: "a-workers", Unhealthy: true},
		{Name: "a-cp1", Cluster: "a", HealthCheck: "a-cp", ControlPlane: true, Remediating: true},
		{Name: "a-cp2", Cluster: "a", HealthCheck: "a-cp", ControlPlane: true, Unhealthy: true},
		{Name: "b-w1", Cluster: "b", HealthCheck: "b-workers", Unhealthy: true},
		{Name: "b-w2", Cluster: "b", HealthCheck: "b-workers"},
		{Name: "b-cp1", Cluster: "b", HealthCheck: "b-cp", ControlPlane: true, Unhealthy: true},
		{Name: "b-cp2", Cluster: "b", HealthCheck: "b-cp", ControlPlane: true},
	}
	limit := remediation.MaxPercent(50)
	ok, why := remediation.MayStart(fleet, "b-w1", limit)
	assert.True(t, ok, "cluster b's workers: 1 of 2 unhealthy: %s", why)
	ok, why = remediation.MayStart(fleet, "b-cp1", limit)
	assert.True(t, ok, "cluster b's control plane is not busy, whatever cluster a does: %s", why)
	ok, why = remediation.MayStart(fleet, "a-cp2", limit)
	assert.False(t, ok, "one control-plane machine of cluster a at a time: %s", why)
	ok, why = remediation.MayStart(fleet, "a-w2", limit)
	assert.False(t, ok, "cluster a's workers: 2 of 2 unhealthy: %s", why)
	assert.Contains(t, why, "a-workers")
}
