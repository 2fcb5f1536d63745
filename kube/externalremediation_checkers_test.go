package kube

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// The health checkers' side, driven as their controllers do it, through
// a client bound to the aggregated checker role of config/rbac. Cluster
// API's real core manager runs in TestRealMachineHealthCheck
// (scripts/build-capi.sh builds it from the module proxy, outside this
// module's pins); medik8s's NodeHealthCheck is not served by the module
// proxy (403 for github.com/medik8s/node-healthcheck-operator) and needs
// OpenShift APIs, so its side is only this driver. The drivers, written
// from the controllers' code, let a test choose the moment a step times
// out and run the scenarios the real manager cannot be steered into:
//
//   - nhcDriver, medik8s NodeHealthCheck: a Node whose Ready condition is
//     not True for `unhealthy` gets one remediation per escalation step,
//     named after the Node, annotated remediation.medik8s.io/node-name,
//     owned by the NodeHealthCheck (not a controller reference), its spec
//     the template's spec.template.spec. A step whose timeout passes, or
//     whose Succeeded is False (even while its object is being deleted),
//     is annotated remediation.medik8s.io/nhc-timed-out unless Succeeded
//     is True, recorded as timed out (the NodeHealthCheck's status, alike
//     for both) and the next step's object is created at once; after the
//     last step the Node is given up on until it is healthy.
//     When the Node is Ready again every remediation of it is deleted. A
//     remediation deleted by someone else while its Node is unhealthy is
//     created again.
//     A remediation it owns whose Node is gone is deleted as an orphan
//     unless PermanentNodeDeletionExpected is True and Succeeded is not
//     (deleteOrphanedRemediationCRs, run on every reconcile).
//   - mhcDriver, Cluster API core v1beta2 MachineHealthCheck with
//     spec.remediation.templateRef: a Machine whose Node is not Ready for
//     `unhealthy`, or whose nodeRef names a missing Node, gets a
//     remediation named after the Machine, in its namespace, owned by the
//     Machine, labelled with its cluster; when the Machine is healthy again
//     (its Node Ready) the remediation is deleted.

// nodeUnhealthySince is how long a Node's Ready condition has not been
// True (zero: it is Ready or missing).
func nodeUnhealthySince(c client.Client, e *extEnv, node string, seen map[string]time.Time) (time.Duration, bool, bool) {
	var n corev1.Node
	err := c.Get(e.ctx, types.NamespacedName{Name: node}, &n)
	if apierrors.IsNotFound(err) {
		return 0, false, true
	}
	if err != nil {
		return 0, false, false
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if ready {
		delete(seen, node)
		return 0, true, false
	}
	if _, ok := seen[node]; !ok {
		seen[node] = time.Now()
	}
	return time.Since(seen[node]), false, false
}

// nhcStep is one escalatingRemediations entry; template "" stands for
// another remediator (its object is a ConfigMap the test can see).
type nhcStep struct {
	template string
	timeout  time.Duration
}

type nhcDriver struct {
	e         *extEnv
	name      string
	uid       types.UID
	unhealthy time.Duration
	steps     []nhcStep
	nodes     []string

	mu       sync.Mutex
	step     map[string]int       // node -> current step
	created  map[string]time.Time // node -> when the current step's object was created
	timedOut map[string]time.Time // node -> when a step timed out or failed (NodeHealthCheck's status timedOut)
	nextAt   map[string]time.Time // node -> when the next remediator's object was created
	seen     map[string]time.Time
}

func newNHC(e *extEnv, unhealthy time.Duration, nodes []string, steps ...nhcStep) *nhcDriver {
	return &nhcDriver{e: e, name: "nhc-" + e.ns, uid: types.UID(fmt.Sprintf("uid-nhc-%d", time.Now().UnixNano())), unhealthy: unhealthy,
		steps: steps, nodes: nodes, step: map[string]int{}, created: map[string]time.Time{}, timedOut: map[string]time.Time{},
		nextAt: map[string]time.Time{}, seen: map[string]time.Time{}}
}

func (d *nhcDriver) run() {
	for d.e.ctx.Err() == nil {
		for _, n := range d.nodes {
			d.pass(n)
		}
		d.orphans()
		time.Sleep(50 * time.Millisecond)
	}
}

// orphans is NodeHealthCheck's deleteOrphanedRemediationCRs over the
// remediations this NodeHealthCheck owns.
func (d *nhcDriver) orphans() {
	c, e := d.e.checker, d.e
	var l v1alpha1.PowerCycleRemediationList
	if err := c.List(e.ctx, &l, client.InNamespace(e.ns)); err != nil {
		return
	}
	for i := range l.Items {
		r := &l.Items[i]
		owned := false
		for _, o := range r.OwnerReferences {
			owned = owned || o.Kind == "NodeHealthCheck" && o.UID == d.uid
		}
		if r.DeletionTimestamp != nil || !owned {
			continue
		}
		if meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionPermanentNodeDeletionExpected) &&
			!meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionSucceeded) {
			continue
		}
		node := r.Name
		if a := r.Annotations[v1alpha1.NodeNameAnnotation]; a != "" {
			node = a
		}
		var n corev1.Node
		if err := c.Get(e.ctx, types.NamespacedName{Name: node}, &n); apierrors.IsNotFound(err) {
			_ = c.Delete(e.ctx, r)
		}
	}
}

func (d *nhcDriver) objName(node string, step int) string {
	if step == 0 {
		return node
	}
	return fmt.Sprintf("%s-%d", node, step)
}

func (d *nhcDriver) pass(node string) {
	c, e := d.e.checker, d.e
	d.mu.Lock()
	defer d.mu.Unlock()
	escalating := false
	for {
		since, healthy, missing := nodeUnhealthySince(c, e, node, d.seen)
		if healthy {
			// Delete every remediation of the Node.
			for i := 0; i <= d.step[node] && i < len(d.steps); i++ {
				d.deleteStep(node, i)
			}
			delete(d.step, node)
			delete(d.created, node)
			return
		}
		if !escalating && since < d.unhealthy && d.created[node].IsZero() {
			return
		}
		if missing && d.created[node].IsZero() {
			return // no Node, nothing to remediate
		}
		i := d.step[node]
		if i >= len(d.steps) {
			return
		}
		if d.created[node].IsZero() {
			d.createStep(node, i)
			return
		}
		st := d.steps[i]
		if st.template == "" {
			return
		}
		var r v1alpha1.PowerCycleRemediation
		if err := c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: d.objName(node, i)}, &r); err != nil {
			if apierrors.IsNotFound(err) {
				// Deleted by someone else: made again on the next pass, as
				// NodeHealthCheck does for an unhealthy Node.
				d.created[node] = time.Time{}
			}
			return
		}
		// NodeHealthCheck's remediate: a step timed out, or failed
		// (Succeeded False, whether or not the object is being deleted),
		// is annotated nhc-timed-out unless it succeeded, then (only once
		// the annotation is written) recorded TimedOut in the
		// NodeHealthCheck's status, both cases alike; the next step
		// follows, and with none left the Node is given up on
		// (NoTemplateLeft) until it is healthy.
		failed := meta.IsStatusConditionFalse(r.Status.Conditions, v1alpha1.ConditionSucceeded)
		if time.Since(d.created[node]) < st.timeout && !failed {
			return
		}
		if !meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionSucceeded) {
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations[v1alpha1.TimedOutAnnotation] = time.Now().UTC().Format(time.RFC3339)
			if err := c.Update(e.ctx, &r); err != nil {
				return
			}
		}
		d.timedOut[node] = time.Now()
		d.step[node] = i + 1
		d.created[node] = time.Time{}
		if d.step[node] >= len(d.steps) {
			return
		}
		escalating = true // the next step's object at once
	}
}

func (d *nhcDriver) createStep(node string, i int) {
	c, e := d.e.checker, d.e
	st := d.steps[i]
	owner := metav1.OwnerReference{APIVersion: "remediation.medik8s.io/v1alpha1", Kind: "NodeHealthCheck", Name: d.name, UID: d.uid}
	meta := metav1.ObjectMeta{Namespace: e.ns, Name: d.objName(node, i), OwnerReferences: []metav1.OwnerReference{owner},
		Annotations: map[string]string{v1alpha1.NodeNameAnnotation: node}}
	var err error
	if st.template == "" {
		err = e.direct.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: meta}) // another remediator's object
		if err == nil {
			d.nextAt[node] = time.Now()
		}
	} else {
		var tp v1alpha1.PowerCycleRemediationTemplate
		if err = c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: st.template}, &tp); err == nil {
			err = c.Create(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: meta, Spec: tp.Spec.Template.Spec})
		}
	}
	if err == nil || apierrors.IsAlreadyExists(err) {
		d.created[node] = time.Now()
	}
}

func (d *nhcDriver) deleteStep(node string, i int) {
	e := d.e
	if d.steps[i].template == "" {
		_ = e.direct.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: d.objName(node, i)}})
		return
	}
	_ = d.e.checker.Delete(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: d.objName(node, i)}})
}

func (d *nhcDriver) times(node string) (timedOut, next time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timedOut[node], d.nextAt[node]
}

// mhcDriver is Cluster API's MachineHealthCheck with external
// remediation through a template.
type mhcDriver struct {
	e         *extEnv
	template  string
	unhealthy time.Duration
	seen      map[string]time.Time
}

func (d *mhcDriver) run() {
	for d.e.ctx.Err() == nil {
		d.pass()
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *mhcDriver) pass() {
	c, e := d.e.checker, d.e
	var ms clusterv1.MachineList
	if err := c.List(e.ctx, &ms, client.InNamespace(e.ns)); err != nil {
		return
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		node := m.Status.NodeRef.Name
		if node == "" {
			continue
		}
		since, healthy, missing := nodeUnhealthySince(c, e, node, d.seen)
		key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
		if healthy {
			_ = c.Delete(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
			continue
		}
		if !missing && since < d.unhealthy {
			continue
		}
		var existing v1alpha1.PowerCycleRemediation
		if err := c.Get(e.ctx, key, &existing); err == nil || !apierrors.IsNotFound(err) {
			continue
		}
		var tp v1alpha1.PowerCycleRemediationTemplate
		if err := c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: d.template}, &tp); err != nil {
			continue
		}
		owner := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}
		_ = c.Create(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name,
			OwnerReferences: []metav1.OwnerReference{owner}, Labels: map[string]string{clusterv1.ClusterNameLabel: m.Spec.ClusterName}},
			Spec: tp.Spec.Template.Spec})
	}
}
