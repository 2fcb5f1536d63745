package kube

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// nhcCreate creates a remediation for node as medik8s NodeHealthCheck's
// resources.manager.generateRemediationCR does: named after the Node,
// annotated with the node name, owned (not controller) by the NHC.
func (e *extEnv) nhcCreate(node string, spec v1alpha1.PowerCycleRemediationSpec) {
	e.t.Helper()
	f := false
	r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: node,
		Annotations:     map[string]string{v1alpha1.NodeNameAnnotation: node},
		Labels:          map[string]string{"app.kubernetes.io/part-of": "node-healthcheck-controller"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "remediation.medik8s.io/v1alpha1", Kind: "NodeHealthCheck", Name: "nhc", UID: "uid-nhc", Controller: &f}}},
		Spec: spec}
	require.NoError(e.t, e.checker.Create(e.ctx, r))
}

// blockKubelet keeps host h's Node NotReady and, once deleted, not
// registered again (a slow boot) until unblockKubelet.
func (e *extEnv) blockKubelet(h string) {
	e.mu.Lock()
	e.hung[e.nodeOf[h]] = time.Now().Add(time.Hour) // never "off since": the kubelet stays hung
	e.mu.Unlock()
	e.setReady(h, false)
}

func (e *extEnv) unblockKubelet(h string) {
	e.mu.Lock()
	delete(e.hung, e.nodeOf[h])
	e.mu.Unlock()
}

func (e *extEnv) nodeGone(h string) bool {
	var n corev1.Node
	return apierrors.IsNotFound(e.direct.Get(e.ctx, types.NamespacedName{Name: e.nodeOf[h]}, &n))
}

// TestReview41_CancelledRemediationForgetsNodeLabels: medik8s
// NodeHealthCheck deletes a remediation whose Node is gone as soon as it
// sees it gone (deleteOrphanedRemediationCRs: PermanentNodeDeletionExpected
// is not True), so with the ResourceDeletion strategy every NHC remediation
// is deleted right after rebootkit deleted the Node. The cancelled
// remediation powers the host on and waits for the Node; if the Node has
// not registered again by the attempt's timeout (counted from the
// attempt's start, not from the cancel: a slow boot), the finalizer is
// removed with the backup of the Node's labels still in status.state, and
// the Node that registers later never gets them back. README: "A
// remediation deleted mid-way ... first releases the host (request
// removed, host powered on, Node labels restored): its finalizer holds the
// object ... until then."
func TestReview41_CancelledRemediationForgetsNodeLabels(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	node := e.nodeOf["h0"]
	e.blockKubelet("h0")
	e.nhcCreate(node, workerSpec(6*time.Second))
	e.eventually("Node deleted by rebootkit", 30*time.Second, func() bool { return e.nodeGone("h0") })
	// The checker deletes the remediation while the Node is gone (since
	// TestReview41_NHCOrphansEveryNodeDeletion's fix rebootkit reports
	// PermanentNodeDeletionExpected True here, so NodeHealthCheck's orphan
	// rule keeps it; a user, or NodeHealthCheck deleting with its own
	// NodeHealthCheck, still deletes it mid-way).
	r := e.remediationOf(node)
	require.NotNil(t, r)
	assert.Equal(t, metav1.ConditionTrue, condition(r, v1alpha1.ConditionPermanentNodeDeletionExpected))
	require.NoError(t, e.checker.Delete(e.ctx, r))
	e.eventually("host on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
	// The Node boots slowly: it registers after the remediation has gone.
	e.eventually("remediation gone", 30*time.Second, func() bool { return e.remediationOf(node) == nil })
	e.unblockKubelet("h0")
	e.eventually("Node registered again and Ready", 10*time.Second, func() bool { _, ready := e.nodeReady("h0"); return ready })
	deadline := time.Now().Add(10 * time.Second)
	var n *corev1.Node
	for time.Now().Before(deadline) {
		n, _ = e.nodeReady("h0")
		if n != nil && n.Labels["role"] == "worker" && n.Labels[hostLabel] == "h0" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NotNil(t, n)
	assert.Equal(t, "worker", n.Labels["role"], "the Node's backed-up label was never restored (the remediation went with the backup)")
	assert.Equal(t, "h0", n.Labels[hostLabel], "the Node's backed-up host label was never restored: the next remediation of this Node finds no host")
}

// TestReview41_SamplesKeepTheirOwnTimeoutRule: the README says "Keep the
// NodeHealthCheck step's timeout above (retryLimit+1) × timeout", and its
// NodeHealthCheck sample and config/samples/nodehealthcheck.yaml break it
// (10m × 2 attempts = 20m against a 15m step): NodeHealthCheck marks the
// remediation timed out and moves on to Machine Deletion Remediation in
// the middle of rebootkit's second power cycle.
func TestReview41_SamplesKeepTheirOwnTimeoutRule(t *testing.T) {
	type nhcDoc struct {
		Kind string `json:"kind"`
		Spec struct {
			Template struct {
				Spec v1alpha1.PowerCycleRemediationSpec `json:"spec"`
			} `json:"template"`
			EscalatingRemediations []struct {
				RemediationTemplate struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"remediationTemplate"`
				Timeout metav1.Duration `json:"timeout"`
			} `json:"escalatingRemediations"`
		} `json:"spec"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	check := func(what, text string) {
		templates := map[string]v1alpha1.PowerCycleRemediationSpec{}
		var nhcs []nhcDoc
		for _, doc := range strings.Split(text, "\n---") {
			var d nhcDoc
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				continue
			}
			switch d.Kind {
			case "PowerCycleRemediationTemplate":
				templates[d.Metadata.Name] = d.Spec.Template.Spec
			case "NodeHealthCheck":
				nhcs = append(nhcs, d)
			}
		}
		require.NotEmpty(t, nhcs, what)
		for _, d := range nhcs {
			for _, step := range d.Spec.EscalatingRemediations {
				if step.RemediationTemplate.Kind != "PowerCycleRemediationTemplate" {
					continue
				}
				spec, ok := templates[step.RemediationTemplate.Name]
				require.True(t, ok, what)
				timeout, retries := 10*time.Minute, 1
				if spec.Timeout != nil {
					timeout = spec.Timeout.Duration
				}
				if spec.RetryLimit != nil {
					retries = int(*spec.RetryLimit)
				}
				need := time.Duration(retries+1) * timeout
				assert.Greater(t, step.Timeout.Duration, need, "%s: NodeHealthCheck step timeout %s is not above (retryLimit+1)×timeout = %s",
					what, step.Timeout.Duration, need)
			}
		}
	}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	i := strings.Index(string(readme), "### Plug rebootkit into a MachineHealthCheck")
	require.GreaterOrEqual(t, i, 0)
	sec := string(readme[i:])
	sec = sec[strings.Index(sec, "```yaml")+len("```yaml"):]
	sec = sec[:strings.Index(sec, "```")]
	check("README", sec)
	sample, err := os.ReadFile("config/samples/nodehealthcheck.yaml")
	require.NoError(t, err)
	check("config/samples/nodehealthcheck.yaml", string(sample))
}

// TestReview41_TimedOutReportsReleasedWhileHostOff: NodeHealthCheck's
// step times out while rebootkit has asked for the power-off and the host
// is already off, but the reboot protocol's evidence has not come in
// (PhasePowerOffRequested). The remediation says Processing False and
// Succeeded False (RemediationCancelled) at once, while the host is still
// off (ground truth). README: "A remediation ... marked
// remediation.medik8s.io/nhc-timed-out, first releases the host (request
// removed, host powered on, Node labels restored): ... `Processing` stays
// True, until then." The next remediator (already created by NHC) and
// rebootkit's power-on then race on a host that is off.
func TestReview41_TimedOutReportsReleasedWhileHostOff(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	node := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(node, workerSpec(time.Minute))
	// The host has gone off (ground truth) and the remediation still
	// waits for the evidence.
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "host never off in power-off-requested\n%s", e.dump())
		if !e.hw["h0"].HardwareOn() {
			if r := e.remediationOf(node); r != nil && r.Status.Phase == remediation.PhasePowerOffRequested.String() {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// NHC: timed out.
	r := e.remediationOf(node)
	r.Annotations[v1alpha1.TimedOutAnnotation] = time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, e.checker.Update(e.ctx, r))
	var onWhenReleased, seen bool
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := e.remediationOf(node)
		if condition(r, v1alpha1.ConditionProcessing) == metav1.ConditionFalse {
			onWhenReleased, seen = e.hw["h0"].HardwareOn(), true
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.True(t, seen, "Processing never False\n%s", e.dump())
	assert.True(t, onWhenReleased, "Processing False (and Succeeded False) while the host was still off (ground truth)\n%s", e.dump())
	e.eventually("host on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
}

// TestReview41_DeletedBeforeFenceGoesWhileHostOff: the checker deletes
// the remediation while the host is off but not yet fenced: the finalizer
// is removed (the object gone) while the host is still off (ground truth);
// the README says the finalizer holds it until the host is powered on.
func TestReview41_DeletedBeforeFenceGoesWhileHostOff(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	node := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(node, workerSpec(time.Minute))
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "host never off in power-off-requested\n%s", e.dump())
		if !e.hw["h0"].HardwareOn() {
			if r := e.remediationOf(node); r != nil && r.Status.Phase == remediation.PhasePowerOffRequested.String() {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, e.checker.Delete(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: node}}))
	var onWhenGone, gone bool
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if e.remediationOf(node) == nil {
			onWhenGone, gone = e.hw["h0"].HardwareOn(), true
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.True(t, gone)
	assert.True(t, onWhenGone, "the remediation went (finalizer removed) while its host was still off (ground truth)")
	e.eventually("host on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
}

// TestReview41_ReleasedWhileOffBypassesStormGuard: the storm guard's
// limit is 1. Host h0's remediation has powered it off (not yet fenced)
// when NodeHealthCheck times it out; h0's BMC refuses the power-on for a
// while (fault still on). The cancelled remediation is released at once
// (admission record, Processing False) although h0 is off, so h1's
// remediation, which the guard held back, starts and powers h1 off: two
// hosts off at once against a limit of 1 (ground truth).
func TestReview41_ReleasedWhileOffBypassesStormGuard(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	n0, n1 := e.nodeOf["h0"], e.nodeOf["h1"]
	start := time.Now()
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "h0 never off in power-off-requested\n%s", e.dump())
		if !e.hw["h0"].HardwareOn() {
			if r := e.remediationOf(n0); r != nil && r.Status.Phase == remediation.PhasePowerOffRequested.String() {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	refuseOn.Store(true)
	// h1 goes bad too: its remediation waits for the storm guard.
	e.hang("h1")
	e.nhcCreate(n1, workerSpec(time.Minute))
	// NHC times h0's remediation out.
	r := e.remediationOf(n0)
	r.Annotations[v1alpha1.TimedOutAnnotation] = time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, e.checker.Update(e.ctx, r))
	time.Sleep(5 * time.Second)
	bothOff := false
	for _, tc := range append(e.hw["h0"].Truth(), e.hw["h1"].Truth()...) {
		if tc.At.Before(start) {
			continue
		}
		if !e.hw["h0"].WasOnAt(tc.At) && !e.hw["h1"].WasOnAt(tc.At) {
			bothOff = true
		}
	}
	assert.False(t, bothOff, "two hosts off at once against the storm guard's limit of 1 (ground truth)\n%s", e.dump())
	refuseOn.Store(false)
	e.eventually("h0 on again", 30*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
}

// TestReview41_KubeletWritableMappingFencesAnotherHost: without Cluster
// API the Node names its host with a label or an annotation
// (hostMapping; the samples use the label rebootkit.io/baremetalhost).
// A kubelet may write both on its own Node (NodeRestriction reserves only
// node-restriction.kubernetes.io/ and the kubernetes.io/k8s.io label
// domains), so one compromised or mislabelled node that goes NotReady
// gets another server powered off and its own Node deleted while its host
// runs (ground truth): here n0 (on h0) names h1.
func TestReview41_KubeletWritableMappingFencesAnotherHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	n0 := e.nodeOf["h0"]
	// n0's kubelet (or a stale label) names h1.
	var n corev1.Node
	require.NoError(t, e.direct.Get(e.ctx, types.NamespacedName{Name: n0}, &n))
	n.Labels[hostLabel] = "h1"
	require.NoError(t, e.direct.Update(e.ctx, &n))
	start := time.Now()
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(20*time.Second))
	time.Sleep(8 * time.Second)
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn, "Node deleted while its host ran (ground truth)\n%s", e.dump())
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()), "h1, whose Node is healthy, was powered off on another Node's label")
}

// nhcOrphans runs medik8s NodeHealthCheck's deleteOrphanedRemediationCRs
// (nodehealthcheck_controller.go): a remediation it owns, not being
// deleted, whose Node (node-name annotation, else its name) does not
// exist, is deleted unless PermanentNodeDeletionExpected is True and
// Succeeded is not True. NHC runs it on every reconcile, and a Node's
// deletion triggers one.
func (e *extEnv) nhcOrphans() {
	for e.ctx.Err() == nil {
		var l v1alpha1.PowerCycleRemediationList
		if err := e.checker.List(e.ctx, &l); err == nil {
			for i := range l.Items {
				r := &l.Items[i]
				if r.DeletionTimestamp != nil || len(r.OwnerReferences) == 0 || r.OwnerReferences[0].Kind != "NodeHealthCheck" {
					continue
				}
				if condition(r, v1alpha1.ConditionPermanentNodeDeletionExpected) == metav1.ConditionTrue &&
					condition(r, v1alpha1.ConditionSucceeded) != metav1.ConditionTrue {
					continue
				}
				node := r.Name
				if a := r.Annotations[v1alpha1.NodeNameAnnotation]; a != "" {
					node = a
				}
				var n corev1.Node
				if err := e.checker.Get(e.ctx, types.NamespacedName{Name: node}, &n); apierrors.IsNotFound(err) {
					_ = e.checker.Delete(e.ctx, r)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReview41_NHCOrphansEveryNodeDeletion: with the default
// ResourceDeletion strategy rebootkit deletes the Node and reports
// PermanentNodeDeletionExpected False, so the real NodeHealthCheck deletes
// the remediation as an orphan the moment the Node is gone: every NHC
// remediation is cancelled mid-way. When the first boot does not bring the
// Node back (it would after a second power cycle: retryLimit 1), the
// cancelled remediation gives up at its timeout instead of retrying, and
// NHC, which only looks at existing Nodes, never remediates or escalates
// again: the Node is lost for good with nobody working on it.
func TestReview41_NHCOrphansEveryNodeDeletion(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	node := e.nodeOf["h0"]
	go e.nhcOrphans()
	e.blockKubelet("h0")
	// The host's first boot hangs; a second power cycle heals it.
	go func() {
		for e.ctx.Err() == nil && e.offs("h0") < 2 {
			time.Sleep(20 * time.Millisecond)
		}
		e.unblockKubelet("h0")
	}()
	one := int32(1)
	spec := workerSpec(5 * time.Second)
	spec.RetryLimit = &one
	e.nhcCreate(node, spec)
	e.eventually("Node deleted by rebootkit", 30*time.Second, func() bool { return e.nodeGone("h0") })
	deadline := time.Now().Add(30 * time.Second)
	back := false
	for time.Now().Before(deadline) && !back {
		_, back = e.nodeReady("h0")
		time.Sleep(100 * time.Millisecond)
	}
	assert.True(t, back, "the Node never came back: the remediation was deleted as NHC's orphan and never retried (power-offs: %d)\n%s", e.offs("h0"), e.dump())
}
