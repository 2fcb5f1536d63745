package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// workerSpec is the tests' template: hard, the Node found by its label.
func workerSpec(timeout time.Duration) v1alpha1.PowerCycleRemediationSpec {
	return v1alpha1.PowerCycleRemediationSpec{Timeout: &metav1.Duration{Duration: timeout},
		HostMapping: &v1alpha1.HostMapping{Label: hostLabel, HostAnnotation: hostNodeAnnotation}}
}

// TestExternalRemediationNHC: a Node goes NotReady; the NodeHealthCheck
// driver creates the remediation from the template; rebootkit fences the
// host (ground truth), deletes the Node only while the host is off, powers
// it on; the Node is back and Ready with its labels restored, Succeeded
// True, and the checker deletes the remediation (our finalizer lets it
// go). It logs the time from NotReady to a fenced host and to a Ready
// Node.
func TestExternalRemediationNHC(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	e.template("pc", workerSpec(time.Minute))
	node := e.nodeOf["h0"]
	nhc := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: 5 * time.Minute})
	go nhc.run()

	t0 := e.hang("h0")
	e.eventually("remediation created", 10*time.Second, func() bool { return e.remediationOf(node) != nil })
	// Succeeded True, or already deleted by the checker that saw the Node
	// Ready (under load the window between the two can be missed).
	e.eventually("Succeeded", 90*time.Second, func() bool {
		r := e.remediationOf(node)
		return r == nil || condition(r, v1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	back := time.Now()
	fenced := e.firstOffAfter("h0", t0)
	n, ready := e.nodeReady("h0")
	require.True(t, ready, "Node Ready when Succeeded")
	e.eventually("the checker deleted the remediation", 30*time.Second, func() bool { return e.remediationOf(node) == nil })

	fences, whileOn := e.fc.counts()
	assert.Equal(t, 1, fences, "the Node deleted once")
	assert.Empty(t, whileOn, "the Node was deleted while its host ran (ground truth)")
	assert.Equal(t, 1, e.offs("h0"), "one power cycle")
	assert.True(t, e.hw["h0"].HardwareOn())
	assert.False(t, e.held("h0"), "no reboot request left on the host")
	assert.Equal(t, "worker", n.Labels["role"], "backed-up labels restored")
	assert.Equal(t, "h0", n.Labels[hostLabel])
	t.Logf("NHC: NotReady -> host fenced (off, ground truth) %s; NotReady -> Node back and Ready, Succeeded %s",
		fenced.Sub(t0).Round(10*time.Millisecond), back.Sub(t0).Round(10*time.Millisecond))
}

// TestExternalRemediationMHC: Cluster API's MachineHealthCheck with a
// templateRef: the remediation named after the Machine, owned by it; the
// host found through the Metal3Machine's BareMetalHost; the out-of-service
// taint strategy (the Node tainted only while the host is off, the taint
// removed when it is back); the checker deletes the remediation once the
// Machine is healthy.
func TestExternalRemediationMHC(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	ctx := context.Background()
	spec := v1alpha1.PowerCycleRemediationSpec{Timeout: &metav1.Duration{Duration: time.Minute}, Strategy: v1alpha1.StrategyOutOfServiceTaint}
	e.template("pc", spec)
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m0-m3m", Namespace: e.ns}
	require.NoError(t, e.direct.Update(ctx, bmh))
	m := newMachine(t, e.direct, e.ns, "m0", false)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: e.nodeOf["h0"]}
	require.NoError(t, e.direct.Status().Update(ctx, m))
	go (&mhcDriver{e: e, template: "pc", seen: map[string]time.Time{}}).run()

	t0 := e.hang("h0")
	e.eventually("remediation created", 10*time.Second, func() bool { return e.remediationOf("m0") != nil })
	r := e.remediationOf("m0")
	require.Len(t, r.OwnerReferences, 1)
	assert.Equal(t, "Machine", r.OwnerReferences[0].Kind)
	e.eventually("Succeeded", 90*time.Second, func() bool {
		r := e.remediationOf("m0")
		return r == nil || condition(r, v1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	e.eventually("the checker deleted the remediation", 30*time.Second, func() bool { return e.remediationOf("m0") == nil })
	fences, whileOn := e.fc.counts()
	assert.Positive(t, fences, "the Node tainted (a second, idempotent taint may follow a stale cached read)")
	assert.Empty(t, whileOn, "the Node was tainted while its host ran (ground truth)")
	assert.Equal(t, 1, e.offs("h0"))
	assert.True(t, e.hw["h0"].HardwareOn())
	n, ready := e.nodeReady("h0")
	require.NotNil(t, n)
	assert.True(t, ready)
	for _, tt := range n.Spec.Taints {
		assert.NotEqual(t, remediation.OutOfServiceTaint, tt.Key, "our out-of-service taint removed")
	}
	t.Logf("MHC: NotReady -> host fenced %s", e.firstOffAfter("h0", t0).Sub(t0).Round(10*time.Millisecond))
}

// TestExternalRemediationNHCTimeoutReleases: NodeHealthCheck's
// escalation step times out while rebootkit holds the host off: the
// driver marks the remediation timed out and creates the next
// remediator's object at once (as NHC does); rebootkit releases the host
// (the reboot request removed, the host powered on, ground truth) and only
// then says Processing False, Succeeded False; the Node comes back with
// its labels.
func TestExternalRemediationNHCTimeoutReleases(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	// The host is slow to power off and on: rebootkit holds it off for a
	// while.
	e.template("pc", workerSpec(time.Minute))
	node := e.nodeOf["h0"]
	nhc := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: time.Hour}, nhcStep{timeout: time.Hour})
	t0 := e.hang("h0")
	go nhc.run()
	// The step times out exactly while the host is off and held.
	e.eventually("host off and held", 30*time.Second, func() bool { return !e.hw["h0"].HardwareOn() && e.held("h0") })
	nhc.mu.Lock()
	nhc.steps[0].timeout = 0
	nhc.mu.Unlock()
	e.eventually("next remediator created", 10*time.Second, func() bool { _, next := nhc.times(node); return !next.IsZero() })
	timedOut, _ := nhc.times(node)
	require.False(t, timedOut.IsZero())
	// The cancelled remediation holds the host until it is on again and
	// the Node back (Processing True), then reports Processing False and
	// Succeeded False; the driver deletes it as soon as it sees the Node
	// Ready, so the remediation may go before Processing False is seen.
	var releasedWhileHeld, releasedWhileOff, seen bool
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := e.remediationOf(node)
		if r == nil || condition(r, v1alpha1.ConditionProcessing) == metav1.ConditionFalse {
			releasedWhileHeld, releasedWhileOff = e.held("h0"), !e.hw["h0"].HardwareOn()
			if r != nil {
				seen = true
				assert.Equal(t, metav1.ConditionFalse, condition(r, v1alpha1.ConditionSucceeded))
			}
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("Processing False seen before the remediation went: %v", seen)
	assert.False(t, releasedWhileHeld, "Processing False (or the remediation gone) while the host still carried the reboot request")
	assert.False(t, releasedWhileOff, "Processing False (or the remediation gone) while the host was off (ground truth)")
	e.eventually("host on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
	e.eventually("Node back with its labels", 30*time.Second, func() bool {
		n, ready := e.nodeReady("h0")
		return ready && n.Labels["role"] == "worker"
	})
	e.eventually("the checker deleted every remediation", 30*time.Second, func() bool { return e.remediationOf(node) == nil })
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn)
	t.Logf("timed out %s after NotReady; host released (on) by %s", timedOut.Sub(t0).Round(10*time.Millisecond),
		time.Since(t0).Round(10*time.Millisecond))
}

// TestExternalRemediationDeletedMidway: the checker deletes the
// remediation while the host is held off: the finalizer keeps it until
// the reboot request is gone; the host ends on (ground truth) and the
// Node's labels are restored.
func TestExternalRemediationDeletedMidway(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	ctx := context.Background()
	e.template("pc", workerSpec(time.Minute))
	node := e.nodeOf["h0"]
	nhc := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: time.Hour})
	e.hang("h0")
	go nhc.run()
	e.eventually("host off and held", 30*time.Second, func() bool { return !e.hw["h0"].HardwareOn() && e.held("h0") })
	require.NoError(t, e.checker.Delete(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: node}}))
	goneWhileHeld := false
	e.eventually("remediation gone", 30*time.Second, func() bool {
		if e.remediationOf(node) != nil {
			return false
		}
		goneWhileHeld = e.held("h0")
		return true
	})
	assert.False(t, goneWhileHeld, "the remediation went while the host still carried its reboot request")
	e.eventually("host on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn)
}

// TestExternalRemediationTwoForOneHost: a MachineHealthCheck's and a
// NodeHealthCheck's remediation of the same host: never both hold it
// (the host's reboot request is one remediation's at any time, its power
// cycles do not overlap), and the one that waits says why.
func TestExternalRemediationTwoForOneHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(2))
	ctx := context.Background()
	e.template("pc", workerSpec(time.Minute))
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m0-m3m", Namespace: e.ns}
	require.NoError(t, e.direct.Update(ctx, bmh))
	m := newMachine(t, e.direct, e.ns, "m0", false)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: e.nodeOf["h0"]}
	require.NoError(t, e.direct.Status().Update(ctx, m))
	node := e.nodeOf["h0"]
	e.hang("h0")
	// Both checkers create theirs at once.
	for _, name := range []string{"m0", node} {
		r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: workerSpec(time.Minute)}
		if name == "m0" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}
		}
		require.NoError(t, e.checker.Create(ctx, r))
	}
	waited := false
	e.eventually("one done, the other waiting then done", 40*time.Second, func() bool {
		a, b := e.remediationOf("m0"), e.remediationOf(node)
		for _, r := range []*v1alpha1.PowerCycleRemediation{a, b} {
			if r != nil && r.Status.Message != "" && contains(r.Status.Message, "held") {
				waited = true
			}
		}
		return condition(a, v1alpha1.ConditionSucceeded) == metav1.ConditionTrue && condition(b, v1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	assert.True(t, waited, "one remediation waited for the other's host")
	assert.Equal(t, 2, e.offs("h0"), "two power cycles, one after the other")
	tr := e.hw["h0"].Truth()
	for i := 1; i < len(tr); i++ {
		assert.NotEqual(t, tr[i-1].On, tr[i].On, "power cycles alternate off/on (never overlapping)")
	}
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn)
}

// TestExternalRemediationStormGuard10: ten Nodes go NotReady at once and
// their checker creates ten remediations; with the storm guard's limit 3
// none may start (10 unhealthy is over the limit, as Cluster API's
// maxUnhealthy): no host goes off over a few seconds (ground truth).
// When the checker deletes seven (those Nodes recovered on their own),
// the three left run, never more than three hosts off at once.
func TestExternalRemediationStormGuard10(t *testing.T) {
	var hosts []string
	for i := 0; i < 10; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d", i))
	}
	e := newExtEnv(t, hosts, remediation.MaxCount(3))
	ctx := context.Background()
	e.template("pc", workerSpec(time.Minute))
	start := time.Now()
	for _, h := range hosts {
		e.hang(h)
		require.NoError(t, e.checker.Create(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.nodeOf[h]},
			Spec: workerSpec(time.Minute)}))
	}
	e.eventually("storm guard reported", 30*time.Second, func() bool {
		r := e.remediationOf(e.nodeOf["h9"])
		return r != nil && contains(r.Status.Message, "storm guard")
	})
	time.Sleep(3 * time.Second)
	for _, h := range hosts {
		assert.False(t, e.hw[h].WasOffDuring(start, time.Now()), "host %s powered off past the storm guard", h)
		assert.False(t, e.held(h))
	}
	for _, h := range hosts[3:] {
		require.NoError(t, e.checker.Delete(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.nodeOf[h]}}))
		e.mu.Lock()
		delete(e.hung, e.nodeOf[h])
		e.mu.Unlock()
	}
	e.eventually("three remediated", 40*time.Second, func() bool {
		for _, h := range hosts[:3] {
			if condition(e.remediationOf(e.nodeOf[h]), v1alpha1.ConditionSucceeded) != metav1.ConditionTrue {
				return false
			}
		}
		return true
	})
	// At most three hosts off at any instant (ground truth, every change).
	var instants []time.Time
	for _, h := range hosts {
		for _, tc := range e.hw[h].Truth() {
			instants = append(instants, tc.At)
		}
	}
	for _, at := range instants {
		off := 0
		for _, h := range hosts {
			if !e.hw[h].WasOnAt(at) {
				off++
			}
		}
		assert.LessOrEqual(t, off, 3, "hosts off at %s", at)
	}
	for _, h := range hosts[3:] {
		assert.Zero(t, e.offs(h), "host %s of a deleted remediation powered off", h)
	}
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn)
}

// TestExternalRemediationNoHost: a Node that names no host (no Machine,
// no mapping match): the remediation fails at once (Succeeded False,
// Processing False: the checker may escalate), says the fix, powers
// nothing, and does not write its status in a loop.
func TestExternalRemediationNoHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	ctx := context.Background()
	spec := v1alpha1.PowerCycleRemediationSpec{HostMapping: &v1alpha1.HostMapping{Label: "no-such-label"}}
	name := e.nodeOf["h0"]
	require.NoError(t, e.checker.Create(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: spec}))
	e.eventually("failed", 10*time.Second, func() bool {
		return condition(e.remediationOf(name), v1alpha1.ConditionSucceeded) == metav1.ConditionFalse
	})
	r := e.remediationOf(name)
	assert.Contains(t, r.Status.Message, "hostMapping")
	assert.Equal(t, metav1.ConditionFalse, condition(r, v1alpha1.ConditionProcessing))
	time.Sleep(time.Second)
	assert.Equal(t, r.ResourceVersion, e.remediationOf(name).ResourceVersion, "status rewritten in a loop")
	assert.Zero(t, e.offs("h0"))
	require.NoError(t, e.checker.Delete(ctx, r))
	e.eventually("gone", 10*time.Second, func() bool { return e.remediationOf(name) == nil })
}

// TestExternalRemediationRefusesKubeletWritableLabel: a hostMapping
// label its Node's kubelet can write names no host, even the right one:
// the remediation fails with NoHost and says which keys are trusted;
// nothing is powered. A node-restriction.kubernetes.io label (which
// NodeRestriction forbids kubelets to set) is trusted.
func TestExternalRemediationRefusesKubeletWritableLabel(t *testing.T) {
	for key, trusted := range map[string]bool{
		hostLabel: false, "kubernetes.io/hostname": false, "node.kubernetes.io/x": false, "node-restriction.kubernetes.ioX/x": false,
		"nodes.node-restriction.kubernetes.io":         false, // no domain: a bare name
		"node-restriction.kubernetes.io/baremetalhost": true, "rack.node-restriction.kubernetes.io/host": true,
	} {
		assert.Equal(t, trusted, kubeletCannotWrite(key), key)
	}
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	ctx := context.Background()
	name := e.nodeOf["h0"]
	// The Node's label names its own host, correctly: still refused.
	spec := v1alpha1.PowerCycleRemediationSpec{HostMapping: &v1alpha1.HostMapping{Label: hostLabel}}
	require.NoError(t, e.checker.Create(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: spec}))
	e.eventually("failed", 10*time.Second, func() bool {
		return condition(e.remediationOf(name), v1alpha1.ConditionSucceeded) == metav1.ConditionFalse
	})
	r := e.remediationOf(name)
	assert.Contains(t, r.Status.Message, "node-restriction.kubernetes.io")
	assert.Empty(t, r.Status.Host)
	assert.Zero(t, e.offs("h0"))
}
