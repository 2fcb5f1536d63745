package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

// RemediationController runs the remediation package's Reconciler on the
// Cluster API Machines of one namespace (power the failed node's host off
// through the reboot API, delete its Node while it is safely off, power it
// on, wait for the Node). Its stores are Machines, Nodes, Admissions and a
// remediation.RebootAPIHosts over RebootHosts (HostOf: HostOfMachine); the
// hosts' power is the RebootController's business, so run both.
//
// Concurrency: the storm guard's admission is a compare-and-swap on the
// Admissions ConfigMap, which the ExternalRemediationController shares
// (its own section, counted here as remediation.Admissions.Others, and
// its hosts locked: ErrHostHeld), so any number of concurrent reconciles
// (and managers, of either controller) admit at most the limit; one Machine is never reconciled
// twice at once (the work queue); run the manager with leader election so
// that one process acts on the hosts.
type RemediationController struct {
	// Name of the controller (default "rebootkit-remediation"); controller-runtime wants
	// names unique in a process.
	Name       string
	Reconciler *remediation.Reconciler
	Namespace  string
	// SweepEvery is the interval of the sweep of the admission record
	// (default DefaultAdmissionSweep): at start and then every SweepEvery, each
	// admitted Machine that no longer exists is reconciled (Sweep), so
	// that one deleted while no manager ran, or whose deletion event was
	// missed, has its request removed from its host and its admission
	// released.
	SweepEvery time.Duration
}

// poll is the Reconciler's poll interval (its default 5 s).
func (c *RemediationController) poll() time.Duration {
	if p := c.Reconciler.Config.PollInterval; p > 0 {
		return p
	}
	return 5 * time.Second
}

// DefaultAdmissionSweep is RemediationController.SweepEvery's default.
const DefaultAdmissionSweep = time.Minute

// Reconcile implements reconcile.Reconciler.
func (c *RemediationController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != c.Namespace {
		return ctrl.Result{}, nil
	}
	res, err := c.Reconciler.Reconcile(ctx, req.Name)
	if goneClean(err) {
		// The Machine is gone and its request removed, its admission
		// released: nothing to do.
		return ctrl.Result{}, nil
	}
	if errors.Is(err, remediation.ErrConflict) {
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if errors.Is(err, ErrHostHeld) || errors.Is(err, remediation.ErrHostHeld) {
		// Its host is held (by another remediation, or by an earlier
		// admission of this name until the host is on): it waits, looked
		// at again every poll interval, not at the work queue's back-off.
		logf.FromContext(ctx).Info("remediation waiting", "machine", req.Name, "reason", err.Error())
		return ctrl.Result{RequeueAfter: c.poll()}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter}, nil
}

// SetupWithManager watches the namespace's Machines, annotation-only
// updates included (the remediation mark is an annotation), and the
// BareMetalHosts that carry the remediation's reboot request, each mapped
// to the Machines of its consumer: a request no attempt owns (a
// superseded leader's write that landed) is removed at once, not at the
// next resync.
func (c *RemediationController) SetupWithManager(mgr ctrl.Manager) error {
	inNS := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == c.Namespace })
	cl := mgr.GetClient()
	gone := make(chan event.TypedGenericEvent[*clusterv1.Machine], 1024)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		c.sweepEvery(ctx, func(name string) {
			select {
			case gone <- event.TypedGenericEvent[*clusterv1.Machine]{Object: &clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}}:
			case <-ctx.Done():
			}
		})
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(c.Name, "rebootkit-remediation")).
		WatchesRawSource(source.Channel(gone, &handler.TypedEnqueueRequestForObject[*clusterv1.Machine]{})).
		For(&clusterv1.Machine{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}), inNS,
		)).
		Watches(&metal3.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return machinesOfHost(ctx, cl, o)
		}), builder.WithPredicates(inNS, predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, has := o.GetAnnotations()[remediation.RebootAnnotation]
			return has
		}))).
		Complete(c)
}

// machinesOfHost maps a host to the Machines whose infrastructure object is
// its consumer (the inverse of HostOfMachine); none if it cannot tell.
func machinesOfHost(ctx context.Context, cl client.Client, o client.Object) []reconcile.Request {
	h, ok := o.(*metal3.BareMetalHost)
	if !ok || h.Spec.ConsumerRef == nil {
		return nil
	}
	var ms clusterv1.MachineList
	if err := cl.List(ctx, &ms, client.InNamespace(h.Namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, m := range ms.Items {
		if r := m.Spec.InfrastructureRef; r.Name == h.Spec.ConsumerRef.Name && (h.Spec.ConsumerRef.Kind == "" || h.Spec.ConsumerRef.Kind == r.Kind) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return out
}

// NewRemediationReconciler wires the remediation Reconciler to the stores
// of this package for one namespace. Hosts that own says are rebootkit's
// are driven through the reboot API (the RebootController serves it), the
// others through the baremetal-operator's own reboot annotation and status
// (OwnedHosts): one actor per host.
//
// The hosts (RebootHosts.Reader, OperatorHosts.Reader) are read with the
// Machines' reader: Machines.Reader once it is set, else cl. The caller
// must set Machines.Reader to a reader of the API server
// (manager.GetAPIReader) when cl reads a cache, as the controller binary
// does: a request removal or a held check that reads a cache behind the
// request the last pass wrote removes nothing and sees the host free.
//
// What it needs to tell a host on again: the hosts rebootkit drives are
// judged on the reboot controller's evidence, never on its record of a
// power-on alone (written before a power-on the BMC may refuse). By
// default that evidence is reboot.Status.OnConfirmed, which the
// RebootController of this version writes once it reads the host On
// after its power-on: run it (an earlier version never writes it, and
// every remediation then keeps its admission, and a moved Machine fails,
// until its timeout). SetRemediationPower adds the remediation's own
// reading (rebootkit-controller calls it), which then decides instead.
func NewRemediationReconciler(cl client.Client, namespace string, own Ownership, cfg remediation.Config, limit remediation.MaxUnhealthy, now func() time.Time) *remediation.Reconciler {
	machines := &Machines{Client: cl, Namespace: namespace}
	rd := machinesReader{machines}
	hosts := &RebootHosts{Client: cl, Namespace: namespace, Reader: rd}
	hostOf := func(ctx context.Context, machine string) (string, error) {
		return HostOfMachine(ctx, cl, namespace, machine)
	}
	return &remediation.Reconciler{
		Machines:   machines,
		Nodes:      &Nodes{Client: cl},
		Admissions: &hostAdmissions{AdmissionStore: &Admissions{Client: cl, Namespace: namespace}, hostOf: hostOf},
		Hosts: &OwnedHosts{Ownership: own,
			Ours:     &remediation.RebootAPIHosts{Hosts: hosts, Now: now, HostOf: hostOf, HostsMayVanish: true, OwnerOnline: true},
			Operator: &OperatorHosts{Client: cl, Namespace: namespace, HostOf: hostOf, Now: now, Reader: rd}},
		Config: cfg, Limit: limit, Now: now,
	}
}

// machinesReader reads with the Machines' reader as it is at the call
// (Machines.Reader, else Machines.Client): setting Machines.Reader after
// NewRemediationReconciler makes the host reads go to the same reader.
type machinesReader struct{ m *Machines }

func (r machinesReader) reader() client.Reader {
	if r.m.Reader != nil {
		return r.m.Reader
	}
	return r.m.Client
}

// Get implements client.Reader.
func (r machinesReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.reader().Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (r machinesReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.reader().List(ctx, list, opts...)
}

// SetRemediationPower gives the hosts rebootkit drives of a Reconciler
// built by NewRemediationReconciler a power controller (the reboot
// controller's, through the lease guard) and the reboot controller's
// default stale-read window: a host then counts as powered on only once it
// reads On past that window after the power-on (remediation.RebootAPIHosts.Power),
// read by the remediation itself rather than taken from the reboot
// controller's confirmation (reboot.Status.OnConfirmed, the default).
// It does nothing to a Reconciler built otherwise.
func SetRemediationPower(rec *remediation.Reconciler, pw func(host string) (power.Controller, error), staleReads time.Duration) {
	if oh, ok := rec.Hosts.(*OwnedHosts); ok {
		if rh, ok := oh.Ours.(*remediation.RebootAPIHosts); ok {
			rh.Power, rh.StaleReads = pw, staleReads
		}
	}
}

// goneClean reports whether err says only that the Machine is gone: a
// pass over a deleted Machine whose request removal or release failed
// (errors.Join of ErrNotFound and that failure) is returned as an error,
// and requeued with the work queue's back-off, for nothing else wakes a
// deleted Machine.
func goneClean(err error) bool {
	if !errors.Is(err, remediation.ErrNotFound) {
		return false
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return true
	}
	for _, e := range j.Unwrap() {
		if e != nil && !errors.Is(e, remediation.ErrNotFound) {
			return false
		}
	}
	return true
}

// Sweep returns the Machines the admission record admits that no longer
// exist (MachineStore.Get: ErrNotFound): each needs a pass (Reconcile)
// that removes its request from its host and releases its admission. No
// Machine event names a Machine deleted while no manager ran (or whose
// deletion was missed), and the host watch maps a host only to Machines
// that exist. A Machine that cannot be read is skipped (the others are
// returned) and its error returned with them.
func (c *RemediationController) Sweep(ctx context.Context) ([]string, error) {
	r := c.Reconciler
	if r == nil || r.Admissions == nil {
		return nil, nil
	}
	a, err := r.Admissions.GetAdmissions(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube: sweep admissions: %w", err)
	}
	var out []string
	var errs []error
	for _, name := range a.Machines {
		_, err := r.Machines.Get(ctx, name)
		switch {
		case errors.Is(err, remediation.ErrNotFound):
			out = append(out, name)
		case err != nil:
			// One Machine that cannot be read (its state annotation does
			// not parse, say) stops the sweep of no other: it is skipped
			// and reported.
			errs = append(errs, fmt.Errorf("kube: sweep admissions: machine %s: %w", name, err))
		}
	}
	return out, errors.Join(errs...)
}

// sweepEvery runs Sweep at once and then every c.SweepEvery until ctx ends,
// handing each Machine found to enqueue.
func (c *RemediationController) sweepEvery(ctx context.Context, enqueue func(name string)) {
	t := time.NewTicker(cmp.Or(c.SweepEvery, DefaultAdmissionSweep))
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		names, err := c.Sweep(sctx) // a failed sweep is tried again at the next tick
		if err != nil {
			logf.FromContext(ctx).Error(err, "admission sweep")
		}
		cancel()
		for _, n := range names {
			enqueue(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
