package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// ReleaseFinalizer holds a PowerCycleRemediation its health checker
// deleted until rebootkit let go of the host: no reboot request left on
// it, no attempt in flight, the Node's backed-up labels and annotations
// (and our out-of-service taint) restored or, while the Node is not
// back, kept under the key nodeBackups of the ConfigMap
// ExternalAdmissionsName, from where they are restored when it registers
// again.
const ReleaseFinalizer = "remediation.rebootkit.io/release-host"

// ExternalAdmissionsName is the ConfigMap under whose key nodeBackups the
// external remediation keeps the Node backups of remediations that went
// while their Node was gone. (Earlier versions kept the admissions of
// PowerCycleRemediations here too; they are now the section
// SectionExternal of the record both remediation controllers share,
// Admissions, where the controller's restore loop moves any it finds
// here.)
const ExternalAdmissionsName = "rebootkit-external-remediation-admissions"

// ExternalRemediationController runs the remediation package's phased
// power-cycle for each PowerCycleRemediation of one namespace, as Cluster
// API's MachineHealthCheck (external remediation) and medik8s's
// NodeHealthCheck create them: the host found once (Machine, Metal3Machine,
// BareMetalHost; or the template's hostMapping: hosts, the BareMetalHost
// naming the Node, or a Node label its kubelet cannot write) and recorded
// in status.host; the reboot request made, the Node deleted or tainted
// only on the reboot protocol's evidence that the host is off, the
// request removed, the Node waited for; status.conditions (Processing,
// Succeeded, PermanentNodeDeletionExpected) and the CAPM3-like phase,
// retryCount and lastRemediated written for the checkers. At most one
// remediation holds a host (the admission record is a lock per host:
// ErrHostHeld), and the storm guard's Limit counts all of them; the
// record is the one the Machine-annotation remediation
// (RemediationController) uses too, each in its section (Admissions), so
// the lock and the limit hold across both controllers. A
// remediation deleted mid-way (ReleaseFinalizer) or marked timed out by
// NodeHealthCheck is cancelled: the host released and the Node restored
// before Processing turns False or the object goes. A remediation that
// failed or was cancelled after the reboot controller powered its host
// off, or while the reboot controller has a reboot pending on it (which
// it carries on with, request or not), keeps Processing True and its
// finalizer until the host is known on (remediation.Host.PoweredOn; with
// Power, an On reading past the stale-read window).
//
// Run it with a RebootController on the same namespace (the hosts' power
// goes through the reboot API), under leader election.
type ExternalRemediationController struct {
	// Name of the controller (default "rebootkit-external-remediation").
	Name      string
	Client    client.Client
	Namespace string
	// Ownership tells rebootkit's hosts from the baremetal-operator's, as
	// for NewRemediationReconciler.
	Ownership Ownership
	// Limit is the storm guard's limit across all remediations of the
	// namespace (the Machine-annotation remediation's admissions
	// included), against its Nodes.
	Limit remediation.MaxUnhealthy
	// PollInterval is how often a remediation is looked at while it waits
	// (default 5 s).
	PollInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Nodes is the Node store (default Nodes over Client).
	Nodes remediation.NodeStore
	// Power, if set, gives a host's power controller (the reboot
	// controller's, through the lease guard): a host counts as powered on
	// after a request only once it reads On past its stale-read window
	// (remediation.RebootAPIHosts.Power), and a remediation whose host the
	// reboot controller powered off after its request, or has a reboot
	// pending on, keeps Processing True and its finalizer, Failed or not,
	// until then. Without it, the
	// reboot controller's power-on record is trusted alone.
	Power func(host string) (power.Controller, error)
	// StaleReads is the reboot controller's default stale-read window
	// (reboot.Config.StaleReads), for hosts that set none.
	StaleReads time.Duration
	// Guard, if set, fences the controller by its lease (the reboot
	// controller's LeaseGuard): a pass starts only while it holds the
	// lease, runs under a context that ends before another process may
	// take it, and each write to a host, a Node or the admission record
	// is held again (remediation.Reconciler.Guard). A process that lost
	// its lease while paused writes nothing.
	Guard reboot.Guard
	// Reader, if set, is what a remediation is read with (the manager's
	// API reader): the remediation checks that its persisted attempt is
	// still the one it decided before each side effect, which a lagging
	// cache could not tell; the hosts are read with it too (a request
	// removal or held check over a cache behind the request the last
	// pass wrote removes nothing and sees the host free). Default Client.
	Reader client.Reader
	// SweepEvery is the interval of the sweep of the external section of
	// the admission record (default DefaultAdmissionSweep): at start (under
	// leader election) and then every SweepEvery, each admitted
	// PowerCycleRemediation that no longer exists is reconciled (Sweep),
	// so that one deleted while no manager ran, or whose kept admission's
	// requeue a restart lost, is released once its host is not held.
	SweepEvery time.Duration
	// HostAnnotations and HostLabels are the keys, besides
	// DefaultHostAnnotation, DefaultHostLabel and the template's, that a
	// hostMapping is cross-checked under (ExternalRemediations).
	HostAnnotations, HostLabels []string
	// Hosts maps a Node to its BareMetalHost, as the controller's owner
	// configures it (ExternalRemediations.Hosts): trusted where a
	// template's hostMapping.hosts entry is not (the health checker
	// writes the remediation's spec).
	Hosts map[string]string
}

func (c *ExternalRemediationController) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *ExternalRemediationController) poll() time.Duration {
	return cmp.Or(c.PollInterval, 5*time.Second)
}

func (c *ExternalRemediationController) store() *ExternalRemediations {
	return &ExternalRemediations{Client: c.Client, Namespace: c.Namespace, Reader: c.Reader,
		HostAnnotations: c.HostAnnotations, HostLabels: c.HostLabels, Hosts: c.Hosts}
}

func (c *ExternalRemediationController) nodes() remediation.NodeStore {
	if c.Nodes == nil {
		return &Nodes{Client: c.Client}
	}
	return c.Nodes
}

// configOf is the phased mode's Config from the remediation's knobs.
func (c *ExternalRemediationController) configOf(spec v1alpha1.PowerCycleRemediationSpec) remediation.Config {
	cfg := remediation.Config{PollInterval: c.poll(), OutOfService: spec.Strategy == v1alpha1.StrategyOutOfServiceTaint}
	if spec.Timeout != nil {
		cfg.Timeout = spec.Timeout.Duration
	}
	if spec.RetryLimit != nil {
		cfg.RetryLimit = int(*spec.RetryLimit)
		if cfg.RetryLimit == 0 {
			cfg.RetryLimit = -1 // none; the package's 0 means its default
		}
	}
	return cfg
}

// reconciler is the remediation Reconciler for one remediation's knobs.
func (c *ExternalRemediationController) reconciler(spec v1alpha1.PowerCycleRemediationSpec) *remediation.Reconciler {
	s := c.store()
	rh := &RebootHosts{Client: c.Client, Namespace: c.Namespace, Reader: c.Reader}
	var hosts remediation.HostStore = &OwnedHosts{Ownership: c.Ownership,
		Ours:     &remediation.RebootAPIHosts{Hosts: rh, Now: c.now, HostOf: s.HostOf, HostsMayVanish: true, OwnerOnline: true, Power: c.Power, StaleReads: c.StaleReads},
		Operator: &OperatorHosts{Client: c.Client, Namespace: c.Namespace, HostOf: s.HostOf, Reader: c.Reader}}
	// Never a RequestFinder: the requests it lists are the Machine
	// remediation's too (it cannot tell a gone PowerCycleRemediation's UID
	// from a Machine's), so a gone remediation whose record names no
	// request keeps its admission (remediation.ErrOrphanRequest) rather
	// than removing another controller's live requests.
	hosts = externalHosts{hosts}
	if spec.Mode == "soft" {
		hosts = softHosts{hosts}
	}
	return &remediation.Reconciler{
		Machines: s, Nodes: c.nodes(), Hosts: hosts,
		Admissions: &hostAdmissions{AdmissionStore: &Admissions{Client: c.Client, Namespace: c.Namespace, Section: SectionExternal}, hostOf: s.HostOf},
		Config:     c.configOf(spec), Limit: c.Limit, Now: c.now, Guard: c.Guard,
	}
}

// Reconcile implements reconcile.Reconciler.
func (c *ExternalRemediationController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != c.Namespace {
		return ctrl.Result{}, nil
	}
	if c.Guard != nil {
		// Not the leader (with the guard's margin): write nothing.
		gctx, cancel, err := c.Guard.Hold(ctx)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("kube: remediation %s/%s: %w", req.Namespace, req.Name, err)
		}
		defer cancel()
		ctx = gctx
	}
	s := c.store()
	r, err := s.get(ctx, req.Name)
	if errors.Is(err, remediation.ErrNotFound) {
		// Gone: release a stale admission. One kept because its host is
		// still held for it (remediation.ErrHostHeld) is looked at again
		// every poll interval; one whose request could not be removed is
		// retried with the work queue's back-off; after a restart, the
		// sweep (Sweep) wakes both, for no event names a deleted
		// remediation.
		_, err = c.reconciler(v1alpha1.PowerCycleRemediationSpec{}).Reconcile(ctx, req.Name)
		switch {
		case goneClean(err):
			err = nil
		case errors.Is(err, remediation.ErrHostHeld):
			// Kept while its host is held: looked at again every poll
			// interval (and by the sweep after a restart).
			return ctrl.Result{RequeueAfter: c.poll()}, nil
		}
		return ctrl.Result{}, err
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.DeletionTimestamp == nil && !slices.Contains(r.Finalizers, ReleaseFinalizer) {
		// Before anything is done to the host: the checker's deletion
		// must wait for the host's release.
		fin := append(slices.Clone(r.Finalizers), ReleaseFinalizer)
		return c.requeueOnConflict(c.Client.Patch(ctx, r, casPatch(r.ResourceVersion, map[string]any{"metadata": map[string]any{"finalizers": fin}})))
	}
	if r.Status.Host == "" {
		return c.findHost(ctx, s, r)
	}
	rec := c.reconciler(r.Spec)
	if mr, err := s.record(ctx, r); err == nil && remediation.InFlight(mr.State.Phase) && nodeDeletionExpected(r, mr.State, true) &&
		!meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionPermanentNodeDeletionExpected) {
		// Persisted before the Node is deleted: NodeHealthCheck must never
		// see the Node gone with it False.
		return c.report(ctx, r, rec, "")
	}
	res, err := rec.Reconcile(ctx, r.Name)
	switch {
	case errors.Is(err, ErrHostHeld) || errors.Is(err, remediation.ErrHostHeld):
		// Held by another remediation, or by the earlier admission of
		// this name kept while its host is held: looked at again every
		// poll interval, not at the work queue's back-off.
		return c.report(ctx, r, rec, "waiting: "+err.Error())
	case errors.Is(err, remediation.ErrConflict):
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	out, err := c.report(ctx, r, rec, "")
	if err == nil && res.RequeueAfter > 0 && (out.RequeueAfter == 0 || res.RequeueAfter < out.RequeueAfter) {
		out.RequeueAfter = res.RequeueAfter
	}
	return out, err
}

func (c *ExternalRemediationController) requeueOnConflict(err error) (ctrl.Result, error) {
	if err != nil && (errors.Is(err, remediation.ErrConflict) || isConflict(err)) {
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{}, err
}

// findHost records the remediation's host in its status, once; without
// one, the remediation fails at once (nothing was done to any host), so
// that the checker escalates.
func (c *ExternalRemediationController) findHost(ctx context.Context, s *ExternalRemediations, r *v1alpha1.PowerCycleRemediation) (ctrl.Result, error) {
	if r.DeletionTimestamp != nil {
		// Never acted: nothing to release.
		return c.removeFinalizer(ctx, r)
	}
	host, v, err := s.findHost(ctx, r)
	if errors.Is(err, ErrNoHost) {
		// Nothing was done to any host: fail at once (the checker may
		// escalate), and look again in case the mapping appears.
		msg := err.Error() + "; fix the template's hostMapping or the Machine's host"
		conds := conditions(r.Status.Conditions, metav1.ConditionFalse, metav1.ConditionFalse, "NoHost", msg, r.Generation, false)
		if r.Status.Message != msg || !sameConditions(conds, r.Status.Conditions) {
			if err := s.patchStatus(ctx, r, map[string]any{"message": msg, "conditions": conds}); err != nil {
				return c.requeueOnConflict(err)
			}
		}
		return ctrl.Result{RequeueAfter: c.poll()}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// The Node, its role and where it came from (the owning Machine by
	// name and UID, or the Node the checker named) are recorded with the
	// host, from the same read (a compare-and-swap on it), and never
	// changed after (nodeOf): another source later cancels.
	src := sourceNow(r)
	body := map[string]any{"host": host, "controlPlane": v.ControlPlane,
		"source": map[string]any{"machine": src.Machine, "machineUID": string(src.MachineUID), "node": src.Node}}
	if v.Name != "" {
		body["nodeName"] = v.Name
	}
	return c.requeueOnConflict(s.patchStatus(ctx, r, body))
}

func (c *ExternalRemediationController) removeFinalizer(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (ctrl.Result, error) {
	if !slices.Contains(r.Finalizers, ReleaseFinalizer) {
		return ctrl.Result{}, nil
	}
	fin := slices.DeleteFunc(slices.Clone(r.Finalizers), func(f string) bool { return f == ReleaseFinalizer })
	if fin == nil {
		fin = []string{}
	}
	return c.requeueOnConflict(c.Client.Patch(ctx, r, casPatch(r.ResourceVersion, map[string]any{"metadata": map[string]any{"finalizers": fin}})))
}

// report reads the remediation and its host again, writes the
// conditions the checkers read (and a waiting message), and removes the
// finalizer of a deleted remediation once the host is released.
func (c *ExternalRemediationController) report(ctx context.Context, old *v1alpha1.PowerCycleRemediation, rec *remediation.Reconciler, waiting string) (ctrl.Result, error) {
	s := c.store()
	r, err := s.get(ctx, old.Name)
	if errors.Is(err, remediation.ErrNotFound) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	mr, err := s.record(ctx, r)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := mr.State
	if waiting == "" && !mr.Machine.NeedsRemediation && needsRemediation(r) {
		// Cancelled because its checker names another Node now (nodeOf).
		v, err := s.nodeOf(ctx, r)
		if err != nil {
			return ctrl.Result{}, err
		}
		waiting = renamedMessage(r, v)
	}
	host, err := rec.Hosts.Get(ctx, r.Name, remediation.LastRequest(mr.Machine, st))
	if err != nil {
		return ctrl.Result{}, err
	}
	var node remediation.Node
	if mr.Machine.NodeName != "" {
		if node, err = rec.Nodes.Get(ctx, mr.Machine.NodeName); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Held (remediation.Held, the test that also keeps its admission):
	// an attempt in flight; or, after it (failed, or cancelled), its
	// reboot request still on the host, or the reboot controller powered
	// the host off after it, or still has the reboot pending (it goes on
	// to power the host off and on without a request), and the host is
	// not known on since (the controller may still power it off or on: a
	// next remediator must not act on it yet).
	held := remediation.Held(st, host)
	processing, succeeded, reason := metav1.ConditionFalse, metav1.ConditionUnknown, "Waiting"
	switch {
	case held:
		processing, reason = metav1.ConditionTrue, "PowerCycling"
	case st.Phase == remediation.PhaseDone && !st.Canceled:
		succeeded, reason = metav1.ConditionTrue, "RemediationFinished"
	case st.Phase == remediation.PhaseFailed:
		succeeded, reason = metav1.ConditionFalse, "RemediationFailed"
	case st.Phase == remediation.PhaseDone || !mr.Machine.NeedsRemediation:
		succeeded, reason = metav1.ConditionFalse, "RemediationCancelled"
	default:
		processing = metav1.ConditionTrue // accepted, waiting to start
	}
	msg := cmp.Or(waiting, st.Message, reason)
	conds := conditions(r.Status.Conditions, processing, succeeded, reason, msg, r.Generation, nodeDeletionExpected(r, st, node.Exists))
	released := !held && (st.Backup == nil && !st.Tainted || !node.Exists)
	if !sameConditions(conds, r.Status.Conditions) || waiting != "" && r.Status.Message != waiting {
		body := map[string]any{"conditions": conds}
		if waiting != "" {
			body["message"] = waiting
		}
		if err := s.patchStatus(ctx, r, body); err != nil {
			return c.requeueOnConflict(err)
		}
		if r, err = s.get(ctx, r.Name); err != nil {
			return c.requeueOnConflict(err)
		}
	}
	if r.DeletionTimestamp != nil && released {
		if (st.Backup != nil || st.Tainted) && !node.Exists {
			// The Node is not back to restore it on: keep the backup where
			// it outlives this object (restoreLoop restores it when the
			// Node registers again), then let the object go.
			b := &nodeBackups{Client: c.Client, Namespace: c.Namespace}
			if err := b.keep(ctx, mr.Machine.NodeName, pendingRestore{Backup: st.Backup, Tainted: st.Tainted}); err != nil {
				return c.requeueOnConflict(err)
			}
		}
		return c.removeFinalizer(ctx, r)
	}
	if waiting != "" || r.DeletionTimestamp != nil || held {
		return ctrl.Result{RequeueAfter: c.poll()}, nil
	}
	return ctrl.Result{}, nil
}

// nodeDeletionExpected is PermanentNodeDeletionExpected for a
// remediation in state st: True from the start of an attempt that deletes
// the Node (ResourceDeletion; so it is persisted before the Node is
// deleted) and, after the attempt, while the Node it deleted is not back
// (a backup waits for it). medik8s NodeHealthCheck deletes a remediation
// whose Node is gone as an orphan unless this is True and Succeeded is
// not (deleteOrphanedRemediationCRs): without it every remediation would
// be cancelled the moment rebootkit deleted its Node.
func nodeDeletionExpected(r *v1alpha1.PowerCycleRemediation, st remediation.State, nodeExists bool) bool {
	if r.Spec.Strategy == v1alpha1.StrategyOutOfServiceTaint {
		return false
	}
	return remediation.InFlight(st.Phase) || st.Backup != nil && !nodeExists
}

// conditions returns the condition list with Processing, Succeeded and
// PermanentNodeDeletionExpected set (transition times kept when the
// status does not change).
func conditions(have []metav1.Condition, processing, succeeded metav1.ConditionStatus, reason, msg string, gen int64, nodeDeletion bool) []metav1.Condition {
	out := slices.Clone(have)
	set := func(t string, st metav1.ConditionStatus) {
		meta.SetStatusCondition(&out, metav1.Condition{Type: t, Status: st, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: gen})
	}
	set(v1alpha1.ConditionProcessing, processing)
	set(v1alpha1.ConditionSucceeded, succeeded)
	pnde := metav1.Condition{Type: v1alpha1.ConditionPermanentNodeDeletionExpected, Status: metav1.ConditionFalse,
		Reason: "NodeNotDeleted", Message: "rebootkit has not deleted the Node", ObservedGeneration: gen}
	if nodeDeletion {
		pnde.Status, pnde.Reason = metav1.ConditionTrue, "NodeDeletedWhileHostOff"
		pnde.Message = "rebootkit deletes the Node while its host is off; it registers again when the host boots: keep this remediation"
	}
	meta.SetStatusCondition(&out, pnde)
	return out
}

func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		y := meta.FindStatusCondition(b, x.Type)
		if y == nil || y.Status != x.Status || y.Reason != x.Reason || y.Message != x.Message || y.ObservedGeneration != x.ObservedGeneration {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// SetupWithManager watches the namespace's PowerCycleRemediations, runs
// the sweep of the external admissions (Sweep: at start and every
// SweepEvery) and the loop that restores, on a Node that registers again,
// the backups of remediations that went before it was back, and moves
// the admissions an earlier version kept in ExternalAdmissionsName (each
// name moved gets a pass at once).
func (c *ExternalRemediationController) SetupWithManager(mgr ctrl.Manager) error {
	gone := make(chan event.TypedGenericEvent[*v1alpha1.PowerCycleRemediation], 1024)
	enqueue := func(ctx context.Context) func(name string) {
		return func(name string) {
			select {
			case gone <- event.TypedGenericEvent[*v1alpha1.PowerCycleRemediation]{Object: &v1alpha1.PowerCycleRemediation{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}}:
			case <-ctx.Done():
			}
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		c.sweepEvery(ctx, enqueue(ctx))
		return nil
	})); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(c.Name, "rebootkit-external-remediation")).
		WatchesRawSource(source.Channel(gone, &handler.TypedEnqueueRequestForObject[*v1alpha1.PowerCycleRemediation]{})).
		For(&v1alpha1.PowerCycleRemediation{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == c.Namespace }),
		)).
		Complete(c); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return c.restoreLoop(ctx, enqueue(ctx))
	}))
}

// externalHosts is the external remediation's HostStore: the wrapped
// store's RequestRemover and RequestReader, and no RequestFinder (see
// reconciler).
type externalHosts struct{ remediation.HostStore }

// RemoveRebootRequest implements remediation.RequestRemover (the wrapped
// store must have it).
func (h externalHosts) RemoveRebootRequest(ctx context.Context, machine string, req remediation.Request) error {
	rr, ok := h.HostStore.(remediation.RequestRemover)
	if !ok {
		return fmt.Errorf("kube: remediation %s: the host store cannot remove a request by its host", machine)
	}
	return rr.RemoveRebootRequest(ctx, machine, req)
}

// ReadRequest implements remediation.RequestReader when the wrapped store
// does (else it reads through the remediation, as Get).
func (h externalHosts) ReadRequest(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	if rr, ok := h.HostStore.(remediation.RequestReader); ok {
		return rr.ReadRequest(ctx, machine, req)
	}
	return h.Get(ctx, machine, req)
}

// softHosts asks for soft reboots: the remediation package's request
// value in soft mode (graceful shutdown first), on writes and on the reads
// that compare it.
type softHosts struct{ remediation.HostStore }

func soft(req remediation.Request) remediation.Request {
	req.Value = strings.Replace(req.Value, `"mode":"hard"`, `"mode":"soft"`, 1)
	return req
}

func (h softHosts) Get(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	return h.HostStore.Get(ctx, machine, soft(req))
}

// ReadRequest implements remediation.RequestReader when the wrapped store
// does (else it reads through the Machine, as Get).
func (h softHosts) ReadRequest(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	if rr, ok := h.HostStore.(remediation.RequestReader); ok {
		return rr.ReadRequest(ctx, machine, soft(req))
	}
	return h.Get(ctx, machine, req)
}

// RemoveRebootRequest implements remediation.RequestRemover (the wrapped
// store, externalHosts, has it): so the Reconciler records the host of a
// soft remediation's request with its admission, where the Machine
// remediation's host lock and a gone remediation's release read it.
func (h softHosts) RemoveRebootRequest(ctx context.Context, machine string, req remediation.Request) error {
	rr, ok := h.HostStore.(remediation.RequestRemover)
	if !ok {
		return fmt.Errorf("kube: remediation %s: the host store cannot remove a request by its host", machine)
	}
	return rr.RemoveRebootRequest(ctx, machine, soft(req))
}

func (h softHosts) AddRebootAnnotation(ctx context.Context, machine string, req remediation.Request) error {
	return h.HostStore.AddRebootAnnotation(ctx, machine, soft(req))
}

// isConflict: the API server refused a write on its resourceVersion.
func isConflict(err error) bool { return apierrors.IsConflict(err) }
