package kube

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41i_NodeRenamedMidwayDeletesRunningHostsNode: the host of a
// PowerCycleRemediation is found once and recorded (status.host), but its
// Node is derived again on every pass (nodeOf: the owning Machine's
// nodeRef, else the remediation-node-name annotation, else its name).
// Anyone with the checker role (update/patch on powercycleremediations)
// who changes the annotation after the host was found makes rebootkit
// power-cycle h0 (the recorded host) and delete n1, the Node of h1,
// which runs throughout: a Node deleted while its host is on, the one
// thing the fencing protocol exists to prevent. Ground truth: the fake
// power of h1 over the whole Node deletion call (groundFence).
func TestReview41i_NodeRenamedMidwayDeletesRunningHostsNode(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	// A slower BMC for h0, so the change lands before its fence.
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 1500 * time.Millisecond})
	n0, n1 := e.nodeOf["h0"], e.nodeOf["h1"]
	e.hang("h0")
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       workerSpec(time.Minute)}))
	e.eventually("host recorded", 10*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Host == "h0"
	})
	// The checker-role identity renames the remediation's Node.
	r := e.remediationOf(n0)
	base := r.DeepCopy()
	r.Annotations[v1alpha1.NodeNameAnnotation] = n1
	require.NoError(t, e.checker.Patch(e.ctx, r, client.MergeFrom(base)))

	start := time.Now()
	deadline := start.Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, whileOn := e.fc.counts(); len(whileOn) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn, "a Node was deleted or tainted while its host ran: the remediation of h0 (status.host) fenced the Node its "+
		"annotation names now (%s, host h1 on throughout: %v)\n%s", n1, e.hw["h1"].HardwareOn(), e.dump())
	assert.True(t, e.hw["h1"].HardwareOn())
}

// TestReview41i_HostsMapOverridesHostAnnotation: hostMapping.hosts is
// taken before, and without checking, the BareMetalHosts' own
// hostAnnotation, although FindHost refuses a label and an annotation
// that disagree. The map travels in the remediation's own spec, which the
// checker role creates (create/update on powercycleremediations), so any
// holder of that role, or a stale or mistyped template, points Node n0 at
// h1, whose annotation says it runs n1: rebootkit powers off h1 (a
// healthy Node's host) and deletes n0 while h0, its real host, runs.
// Ground truth: h1's fake power, and the groundFence over n0's deletion.
func TestReview41i_HostsMapOverridesHostAnnotation(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	start := time.Now()
	spec := workerSpec(time.Minute)
	spec.HostMapping.Hosts = map[string]string{n0: "h1"} // h1's annotation names n1
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       spec}))
	deadline := start.Add(10 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"h1, whose BareMetalHost annotation %q names %s (Ready), was powered off for the remediation of %s: hostMapping.hosts "+
			"was trusted over the host's own annotation\n%s", hostNodeAnnotation, e.nodeOf["h1"], n0, e.dump())
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn, "a Node was deleted while its host ran")
}

// TestReview41i_StaleRemediationsGrowPercentDenominator: the storm
// guard's fleet (ExternalRemediations.List) is every PowerCycleRemediation
// plus the Nodes none names, so a remediation whose Node no longer exists
// is a member of its own. Such remediations stay: NodeHealthCheck marks a
// failed step timed out and escalates (e.g. to Machine Deletion
// Remediation, whose replacement Node has a new name), and deletes a
// remediation whose Node is gone only when Succeeded and
// PermanentNodeDeletionExpected are both True (deleteOrphanedRemediationCRs),
// which a failed one never is. Each one grows the percentage limit's
// denominator past the cluster's Nodes. Three Nodes, MaxPercent(30):
// floor(0.9) = 0, no remediation may start. After three old remediations
// of Nodes that are gone, the fleet is 6 members, floor(1.8) = 1, and h0
// is powered off: the limit no longer holds against the cluster's Nodes
// (doc.go: "against the cluster's Nodes"). Ground truth: h0's fake power.
func TestReview41i_StaleRemediationsGrowPercentDenominator(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1", "h2"}, remediation.MaxPercent(30))
	for i := range 3 {
		n := "gone-" + string(rune('a'+i))
		require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n, Annotations: map[string]string{
				v1alpha1.NodeNameAnnotation: n, v1alpha1.TimedOutAnnotation: time.Now().UTC().Format(time.RFC3339)}},
			Spec: workerSpec(time.Minute)}))
	}
	time.Sleep(time.Second) // in the controllers' cache
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	start := time.Now()
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       workerSpec(time.Minute)}))
	deadline := start.Add(8 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h0"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	assert.False(t, e.hw["h0"].WasOffDuring(start, time.Now()),
		"h0 powered off: 1 unhealthy of 3 Nodes is over MaxPercent(30) (allows 0), but three remediations of Nodes that no longer "+
			"exist counted as members (6)\n%s", e.dump())
}

// TestReview41i_ControlPlaneRuleForgetsDeletedNode: the storm guard lets
// one control-plane remediation run at a time (MayStart: cpBusy; README:
// "one at a time if control plane"). Without a Cluster API Machine,
// ExternalRemediations.nodeOf reads the control-plane role from the
// Node's label on every pass; once rebootkit deletes the Node (while its
// host is off), the remediation in flight is no longer a control-plane
// one, and the remediation of a second control-plane Node is admitted
// while the first control-plane host is still off: two of the control
// plane's hosts down at once (etcd quorum with three). MaxCount(2), so
// only the control-plane rule stands in the way. h0's BMC refuses the
// power-on (the fault kept on), so h0 stays off. Ground truth: the fake
// power of both hosts.
func TestReview41i_ControlPlaneRuleForgetsDeletedNode(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1", "h2"}, remediation.MaxCount(2))
	for _, h := range []string{"h0", "h1", "h2"} {
		n, _ := e.nodeReady(h)
		require.NotNil(t, n)
		base := n.DeepCopy()
		n.Labels[controlPlaneNodeLabel] = ""
		require.NoError(t, e.direct.Patch(e.ctx, n, client.MergeFrom(base)))
	}
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	n0, n1 := e.nodeOf["h0"], e.nodeOf["h1"]
	e.hang("h0")
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       workerSpec(time.Minute)}))
	e.eventually("h0 off and its Node deleted", 20*time.Second, func() bool {
		n, _ := e.nodeReady("h0")
		return n == nil && !e.hw["h0"].HardwareOn()
	})
	e.hang("h1")
	start := time.Now()
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n1, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n1}},
		Spec:       workerSpec(time.Minute)}))
	deadline := start.Add(8 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"control-plane host h1 powered off while control-plane host h0 is off under its remediation (its Node deleted by it): "+
			"the one-control-plane-at-a-time rule no longer counts h0's remediation\n%s", e.dump())
}

// TestReview41i_ControlPlaneRuleBlindToMachineRemediation: the shared
// record makes the storm guard hold across both remediation controllers
// (README: "--remediation-limit bounds their hosts together"), but the
// other section is read as Admissions.Others, a host per name, without the
// Member (whose ControlPlane the Machine remediation records); withOthers
// never marks an Other as a control-plane remediation in flight. The
// Machine remediation holds control-plane Machine machine-h1 (admitted,
// member ControlPlane, its request on h1, h1 off); a PowerCycleRemediation
// of control-plane Node n0 is admitted under MaxCount(2) and h0 is
// powered off: two control-plane hosts down at once, which the
// one-control-plane-at-a-time rule forbids within either controller.
// Ground truth: the fake power of both hosts.
func TestReview41i_ControlPlaneRuleBlindToMachineRemediation(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1", "h2"}, remediation.MaxCount(2))
	for _, h := range []string{"h0", "h1", "h2"} {
		n, _ := e.nodeReady(h)
		require.NotNil(t, n)
		base := n.DeepCopy()
		n.Labels[controlPlaneNodeLabel] = ""
		require.NoError(t, e.direct.Patch(e.ctx, n, client.MergeFrom(base)))
	}
	at := time.Now()
	ma := &Admissions{Client: e.direct, Namespace: e.ns}
	adm, err := ma.GetAdmissions(e.ctx)
	require.NoError(t, err)
	adm.Machines = append(adm.Machines, "machine-h1")
	adm.Requests = map[string]remediation.Request{"machine-h1": {Value: remediation.RebootValue("machine-uid-h1", at), At: at, Host: "h1"}}
	adm.Members = map[string]remediation.Member{"machine-h1": {Cluster: "c1", HealthCheck: "c1-cp", ControlPlane: true, Wrote: true}}
	require.NoError(t, ma.PutAdmissions(e.ctx, adm))
	require.NoError(t, e.hw["h1"].Off(e.ctx, power.ModeHard))

	n0 := e.nodeOf["h0"]
	e.hang("h0")
	start := time.Now()
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       workerSpec(time.Minute)}))
	deadline := start.Add(8 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h0"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	assert.False(t, e.hw["h0"].WasOffDuring(start, time.Now()),
		"control-plane host h0 powered off by the external remediation while the Machine remediation holds control-plane machine-h1 "+
			"(h1 off): two control-plane hosts down\n%s", e.dump())
}

// TestReview41i_SameNameWaitsOnBackoffAfterHostOn: NodeHealthCheck
// creates a remediation again under the Node's name while the admission of
// an earlier one of that name (another UID: deleted, its finalizer gone,
// e.g. removed by hand on a stuck host) still holds h0, off behind a BMC
// that refuses the power-on. The Reconciler releases the earlier
// admission first and returns remediation.ErrHostHeld while h0 is held;
// the controller maps only kube.ErrHostHeld to "waiting" (a report and a
// requeue every poll interval), so this one is an error for the work
// queue, retried with exponential back-off (up to 1000 s), and nothing
// else wakes it: once h0 is on again the new remediation starts only at
// its next back-off retry, many poll intervals later (meanwhile it reports
// no condition at all). Ground truth: h0's fake power (its power-on after
// the BMC heals, the new remediation's power-off).
func TestReview41i_SameNameWaitsOnBackoffAfterHostOn(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	n0 := e.nodeOf["h0"]
	// The manager is running (its start sweep done) before the record
	// below is written: a probe remediation gets the finalizer, then goes.
	probe := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "probe"}, Spec: workerSpec(time.Minute)}
	require.NoError(t, e.checker.Create(e.ctx, probe))
	e.eventually("probe seen by the controller", 30*time.Second, func() bool {
		r := e.remediationOf("probe")
		return r != nil && len(r.Finalizers) > 0
	})
	require.NoError(t, e.checker.Delete(e.ctx, probe))
	e.eventually("probe gone", 30*time.Second, func() bool { return e.remediationOf("probe") == nil })
	time.Sleep(time.Second)
	// The earlier remediation of n0: admitted, its request on h0.
	at := time.Now().UTC().Truncate(time.Second)
	v := remediation.RebootValue("uid-earlier", at)
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	a, err := shared.GetAdmissions(e.ctx)
	require.NoError(t, err)
	a.Machines = []string{n0}
	a.Requests = map[string]remediation.Request{n0: {Value: v, At: at, Host: "h0"}}
	a.Members = map[string]remediation.Member{n0: {Wrote: true}}
	require.NoError(t, shared.PutAdmissions(e.ctx, a))
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey] = v
	require.NoError(t, e.direct.Update(e.ctx, bmh))
	e.eventually("h0 off for the earlier request", 30*time.Second, func() bool { return !e.hw["h0"].HardwareOn() })

	e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	time.Sleep(20 * time.Second) // h0 held: the BMC refuses the power-on
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	healed := time.Now()
	refuseOn.Store(false)
	e.eventually("h0 powered on by the reboot controller", 20*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
	on := time.Now()
	deadline := on.Add(15 * time.Second)
	for time.Now().Before(deadline) && e.firstOffAfter("h0", on).IsZero() {
		time.Sleep(100 * time.Millisecond)
	}
	off := e.firstOffAfter("h0", on)
	t.Logf("healed %s, on %s, new remediation's power-off %v", healed.Format("15:04:05.000"), on.Format("15:04:05.000"), off)
	assert.False(t, off.IsZero(),
		"h0 on since %s, held by nothing, yet the new remediation of %s (poll interval 200 ms) did not start within 15 s: it waits for "+
			"the work queue's back-off\n%s", on.Format("15:04:05.000"), n0, e.dump())
}
