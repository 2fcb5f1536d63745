package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// hostLabel is a Node label naming its BareMetalHost in these tests: a
// key the Node's kubelet can write, which hostMapping refuses.
const hostLabel = "rebootkit.io/baremetalhost"

// hostNodeAnnotation is the BareMetalHost annotation naming its Node in
// these tests (hostMapping.hostAnnotation).
const hostNodeAnnotation = "rebootkit.io/node"

// extEnv is a namespace with BareMetalHosts (each with a fake power),
// their Nodes (a simulated kubelet per Node), the reboot and external
// remediation controllers under the generated role, and a client with
// the health checkers' aggregated role.
type extEnv struct {
	t       *testing.T
	ctx     context.Context
	direct  client.Client
	checker client.Client
	ns      string
	hw      map[string]*fake.Power // by host
	nodeOf  map[string]string      // host -> node
	fc      *groundFence

	mu   sync.Mutex
	hung map[string]time.Time // node -> when it hung (NotReady until a power cycle after)

	limit   remediation.MaxUnhealthy
	rcfg    reboot.Config
	ctlUser *rest.Config // the controllers' identity, kept across restarts
	stopCtl func()       // stops the running controllers (and waits)
	starts  int          // controller starts (their names are unique per process)
	stop    func()       // stops it all (and waits); idempotent
	guard   reboot.Guard // the external remediation controller's lease guard (nil: none)
}

// groundFence checks at every Node deletion or taint that the Node's
// host was off (ground truth from its fake power) for the whole call.
type groundFence struct {
	remediation.NodeStore
	env *extEnv
	*fenceRecord
}

// fenceRecord is what the groundFences of one env (one per controller
// start) saw.
type fenceRecord struct {
	mu      sync.Mutex
	fences  int
	whileOn []string
}

func (g *groundFence) check(node string, from, to time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fences++
	for h, n := range g.env.nodeOf {
		if n == node && !g.env.hw[h].OffThroughout(from, to) {
			g.whileOn = append(g.whileOn, fmt.Sprintf("%s (host %s ran during [%s, %s])", node, h,
				from.Format("15:04:05.000"), to.Format("15:04:05.000")))
		}
	}
}

func (g *groundFence) Delete(ctx context.Context, name, uid string) error {
	from := time.Now()
	err := g.NodeStore.Delete(ctx, name, uid)
	g.check(name, from, time.Now())
	return err
}

func (g *groundFence) SetOutOfService(ctx context.Context, name string, on bool) error {
	from := time.Now()
	err := g.NodeStore.SetOutOfService(ctx, name, on)
	if on {
		g.check(name, from, time.Now())
	}
	return err
}

func (g *fenceRecord) counts() (int, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fences, append([]string(nil), g.whileOn...)
}

// checkerRules are the aggregated checker role of config/rbac plus what a
// health checker reads of its own (Nodes, Machines).
func checkerRules(t *testing.T) []rbacv1.PolicyRule {
	cluster, _ := rolesOf(t, "config/rbac/external_remediation_checker_role.yaml")
	require.NotEmpty(t, cluster)
	return append(cluster,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch"}})
}

// newExtEnv starts it all with hosts h0..: host i runs node "<ns>-n<i>",
// labelled with its host's name.
func newExtEnv(t *testing.T, hosts []string, limit remediation.MaxUnhealthy) *extEnv {
	t.Helper()
	return newExtEnvWith(t, hosts, limit, reboot.Config{StaleReads: 500 * time.Millisecond, SoftTimeout: 2 * time.Second})
}

// newExtEnvWith is newExtEnv with the reboot controller's Config (its
// StaleReads is also the remediation controller's).
func newExtEnvWith(t *testing.T, hosts []string, limit remediation.MaxUnhealthy, rcfg reboot.Config) *extEnv {
	t.Helper()
	return newExtEnvGuarded(t, hosts, limit, rcfg, nil)
}

// newExtEnvGuarded is newExtEnvWith with the external remediation
// controller fenced by guard.
func newExtEnvGuarded(t *testing.T, hosts []string, limit remediation.MaxUnhealthy, rcfg reboot.Config, guard reboot.Guard) *extEnv {
	t.Helper()
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	e := &extEnv{t: t, ctx: ctx, direct: adminClient(t), hw: map[string]*fake.Power{}, nodeOf: map[string]string{}, hung: map[string]time.Time{},
		limit: limit, rcfg: rcfg, guard: guard}
	e.ns = newNamespace(t, e.direct)
	// Nodes are cluster-wide: the earlier tests' (no test runs in
	// parallel) are not this cluster's, and would count in the storm
	// guard's percentages (the cluster's Nodes).
	require.NoError(t, e.direct.DeleteAllOf(ctx, &corev1.Node{}))
	for _, h := range hosts {
		bmh := newBMH(t, e.direct, e.ns, h)
		bmh.Annotations = map[string]string{hostNodeAnnotation: e.ns + "-" + h}
		require.NoError(t, e.direct.Update(ctx, bmh))
		e.hw[h] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
		e.nodeOf[h] = e.ns + "-" + h
		require.NoError(t, e.register(h, map[string]string{hostLabel: h, "role": "worker"}))
	}
	cc, err := client.New(asUser(t, "checker-"+e.ns, checkerRules(t), ""), client.Options{Scheme: scheme})
	require.NoError(t, err)
	e.checker = cc

	e.ctlUser = asController(t, e.ns)
	e.fc = &groundFence{env: e, fenceRecord: &fenceRecord{}}
	e.startControllers()
	var wg sync.WaitGroup
	wg.Add(len(hosts))
	for _, h := range hosts {
		go func() { defer wg.Done(); e.kubelet(h) }()
	}
	var once sync.Once
	e.stop = func() { once.Do(func() { e.stopCtl(); cancel(); wg.Wait() }) }
	t.Cleanup(e.stop)
	return e
}

// startControllers starts the reboot and external remediation
// controllers in a new manager (a process start).
func (e *extEnv) startControllers() {
	t := e.t
	mgr := managerAs(t, e.ctlUser, e.ns)
	e.starts++
	suffix := ""
	if e.starts > 1 {
		suffix = fmt.Sprintf("-%d", e.starts)
	}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: e.ns}, Now: time.Now,
		Power:  func(h string) (power.Controller, error) { return e.hw[h], nil },
		Config: e.rcfg}
	require.NoError(t, (&RebootController{Name: "reboot-" + e.ns + suffix, Reconciler: rr, Namespace: e.ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	fc := &groundFence{NodeStore: &Nodes{Client: mgr.GetClient()}, env: e, fenceRecord: e.fc.fenceRecord}
	if e.fc.NodeStore == nil {
		fc = e.fc
		fc.NodeStore = &Nodes{Client: mgr.GetClient()}
	}
	xc := &ExternalRemediationController{Name: "ext-" + e.ns + suffix, Client: mgr.GetClient(), Namespace: e.ns, Ownership: Ownership{NoOperator: true},
		Limit: e.limit, PollInterval: 200 * time.Millisecond, Nodes: fc,
		Power: func(h string) (power.Controller, error) { return e.hw[h], nil }, StaleReads: e.rcfg.StaleReads,
		Guard: e.guard, Reader: mgr.GetAPIReader()}
	require.NoError(t, xc.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	e.stopCtl = func() { cancel(); <-done }
}

// restart stops the controllers (their calls in flight cut off) and
// starts them again, as after a crash between two steps.
func (e *extEnv) restart() {
	e.stopCtl()
	e.startControllers()
}

// register creates host h's Node, Ready, as a kubelet does (with only
// the labels given).
func (e *extEnv) register(h string, labels map[string]string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.nodeOf[h], Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID(e.nodeOf[h])}}
	if err := e.direct.Create(e.ctx, n); err != nil {
		return err
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}
	return e.direct.Status().Update(e.ctx, n)
}

// providerID is the spec.providerID a Node's kubelet registers it with
// (the infrastructure provider reports the same on the Machine's
// infrastructure object, which is how Cluster API finds a Machine's Node).
func providerID(node string) string { return "rebootkit-test:///" + node }

// hang makes host h's Node NotReady until its host is power-cycled.
func (e *extEnv) hang(h string) time.Time {
	e.mu.Lock()
	now := time.Now()
	e.hung[e.nodeOf[h]] = now
	e.mu.Unlock()
	e.setReady(h, false)
	return now
}

func (e *extEnv) setReady(h string, ready bool) {
	for i := 0; i < 20; i++ {
		var n corev1.Node
		if err := e.direct.Get(e.ctx, types.NamespacedName{Name: e.nodeOf[h]}, &n); err != nil {
			return
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: now, LastTransitionTime: now}}
		if err := e.direct.Status().Update(e.ctx, &n); err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}

// kubelet simulates host h's kubelet: while the host runs, its Node is
// registered (again, with the kubelet's own labels only) and Ready,
// unless it hung and the host has not been off since.
func (e *extEnv) kubelet(h string) {
	for e.ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		hw := e.hw[h]
		if !hw.HardwareOn() {
			continue
		}
		e.mu.Lock()
		since, hung := e.hung[e.nodeOf[h]]
		if hung && hw.WasOffDuring(since, time.Now()) {
			delete(e.hung, e.nodeOf[h])
			hung = false
		}
		e.mu.Unlock()
		var n corev1.Node
		err := e.direct.Get(e.ctx, types.NamespacedName{Name: e.nodeOf[h]}, &n)
		if apierrors.IsNotFound(err) {
			if !hung {
				_ = e.register(h, map[string]string{"kubernetes.io/hostname": e.nodeOf[h]})
			}
			continue
		}
		if err != nil {
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		if ready == hung {
			e.setReady(h, !hung)
		}
	}
}

// template creates a PowerCycleRemediationTemplate.
func (e *extEnv) template(name string, spec v1alpha1.PowerCycleRemediationSpec) *v1alpha1.PowerCycleRemediationTemplate {
	tp := &v1alpha1.PowerCycleRemediationTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.PowerCycleRemediationTemplateSpec{Template: v1alpha1.PowerCycleRemediationTemplateResource{Spec: spec}}}
	require.NoError(e.t, e.direct.Create(e.ctx, tp))
	return tp
}

// remediationOf reads a remediation directly (nil if gone).
func (e *extEnv) remediationOf(name string) *v1alpha1.PowerCycleRemediation {
	var r v1alpha1.PowerCycleRemediation
	err := e.direct.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &r)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	return &r
}

// condition returns a remediation's condition status ("" if unset).
func condition(r *v1alpha1.PowerCycleRemediation, t string) metav1.ConditionStatus {
	if r == nil {
		return ""
	}
	if c := meta.FindStatusCondition(r.Status.Conditions, t); c != nil {
		return c.Status
	}
	return ""
}

// eventually polls f until it holds or the deadline passes.
func (e *extEnv) eventually(what string, d time.Duration, f func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			e.t.Fatalf("not in %s: %s\n%s", d, what, e.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// held reports whether host h carries the remediation's reboot request
// (a direct read).
func (e *extEnv) held(h string) bool {
	var bmh = newBMHRef(e.ns, h)
	require.NoError(e.t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	_, ok := bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey]
	return ok
}

// offs counts host h's power-offs (ground truth).
func (e *extEnv) offs(h string) int {
	n := 0
	for _, tc := range e.hw[h].Truth() {
		if !tc.On {
			n++
		}
	}
	return n
}

// firstOffAfter is when host h's hardware first went off after t.
func (e *extEnv) firstOffAfter(h string, t time.Time) time.Time {
	for _, tc := range e.hw[h].Truth() {
		if !tc.On && tc.At.After(t) {
			return tc.At
		}
	}
	return time.Time{}
}

// nodeReady reads host h's Node directly: exists and Ready.
func (e *extEnv) nodeReady(h string) (*corev1.Node, bool) {
	var n corev1.Node
	if err := e.direct.Get(e.ctx, types.NamespacedName{Name: e.nodeOf[h]}, &n); err != nil {
		return nil, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return &n, c.Status == corev1.ConditionTrue
		}
	}
	return &n, false
}

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// dump lists the remediations and hosts, for a failure message.
func (e *extEnv) dump() string {
	var l v1alpha1.PowerCycleRemediationList
	_ = e.direct.List(e.ctx, &l, client.InNamespace(e.ns))
	var b strings.Builder
	for _, r := range l.Items {
		fmt.Fprintf(&b, "%s: host=%s phase=%s msg=%q deleting=%v conds=", r.Name, r.Status.Host, r.Status.Phase, r.Status.Message, r.DeletionTimestamp != nil)
		for _, c := range r.Status.Conditions {
			fmt.Fprintf(&b, "%s=%s/%s ", c.Type, c.Status, c.Reason)
		}
		b.WriteString("\n")
	}
	for h, hw := range e.hw {
		fmt.Fprintf(&b, "%s: on=%v held=%v offs=%d\n", h, hw.HardwareOn(), e.held(h), e.offs(h))
	}
	return b.String()
}
