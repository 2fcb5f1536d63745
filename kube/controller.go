package kube

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// RebootController runs the reboot package's Reconciler on the
// BareMetalHosts of one namespace: it is reconciled on every change of a
// host, annotation-only changes included (they do not bump the
// generation: a GenerationChangedPredicate alone would never see a reboot
// request), requeued when the decision asks, and each decision's warnings
// (malformed annotations) become Kubernetes events on the host.
type RebootController struct {
	// Reconciler is the reboot reconciler; its Hosts must be a
	// RebootHosts of Namespace.
	// Name of the controller (default "rebootkit-reboot"); controller-runtime wants
	// names unique in a process.
	Name       string
	Reconciler *reboot.Reconciler
	Namespace  string
	// Recorder, if set, receives the decisions' warnings as events.
	Recorder events.EventRecorder
	// Client reads the host an event is about (set by SetupWithManager).
	Client client.Client
	// APIReader reads a host again, uncached, while a power command of it
	// runs (the manager's GetAPIReader(); nil: Client): a command is not
	// sent once the host is read no longer rebootkit's (ErrNotOurs).
	APIReader client.Reader
	// MaxConcurrentReconciles is how many hosts are reconciled at once
	// (default 32): a slow BMC holds one worker, never the namespace.
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one pass of one host (default 2 min); the
	// power calls inside it are bounded by the Powers' pool too.
	ReconcileTimeout time.Duration
	// Ownership says which hosts are rebootkit's to power: the others
	// belong to the baremetal-operator and are refused with an event
	// (RebootRefused, once per set of reboot annotations, not on every
	// change of the host), without any power call. The zero value assumes
	// an operator and takes only detached hosts.
	Ownership Ownership
	// IdlePoll bounds the time between two passes of a host of rebootkit's
	// (default 60 s, the baremetal-operator's power-state poll): a host
	// that crashes off, or is powered on or off behind rebootkit's back,
	// is noticed within it, not at the manager's resync (10 h).
	IdlePoll time.Duration
	// Async, if it is what the Reconciler's Power goes through, is told
	// to reconcile a host when a BMC call that outlived its pass ends
	// (SetupWithManager sets its Done); a pass whose call is still running
	// is requeued after a minute at the latest.
	Async *Async
	// Forget, if set, is called with a host's name once the host is gone
	// (its reconcile finds it NotFound): the power layer drops what it
	// keeps for it (Powers.Forget: its BMC session is logged out). Nil:
	// the Reconciler's Power is asked for the gone host, which
	// Powers.Controller (also under an Async) answers by forgetting it,
	// without any BMC call.
	Forget func(host string)

	refusedMu    sync.Mutex
	refused      map[string]string       // host -> the reboot annotations last refused
	resetRefused map[string]string       // host -> what of a spec.disablePowerOff host was last refused
	resetOut     map[string]resetOutcome // host -> the outcome of its reset path's last command
	conflicts    map[string]int          // host -> write conflicts in a row (conflictDelay)
}

// refuseOnce reports whether the refusal of host's reboot annotations ann
// has not been reported yet (and notes it).
func (c *RebootController) refuseOnce(host string, ann map[string]string) bool {
	keys := make([]string, 0, len(ann))
	for k, v := range ann {
		if k == reboot.Annotation || strings.HasPrefix(k, reboot.AnnotationPrefix) {
			keys = append(keys, k+"="+v)
		}
	}
	slices.Sort(keys)
	sig := strings.Join(keys, "\x00")
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	if c.refused == nil {
		c.refused = map[string]string{}
	}
	if sig == "" {
		delete(c.refused, host)
		return false
	}
	if c.refused[host] == sig {
		return false
	}
	c.refused[host] = sig
	return true
}

// forget drops what the controller and the power layer keep for host,
// which is gone (issue 35): the refusals and conflicts noted for its
// events, the reset outcome, Async's state and the Pool's entry (see
// Forget).
func (c *RebootController) forget(host string) {
	c.forgetReset(host) // and the late outcome Async keeps
	c.refusedMu.Lock()
	delete(c.refused, host)
	delete(c.resetRefused, host)
	c.refusedMu.Unlock()
	c.conflictsEnd(host)
	if c.Async != nil {
		c.Async.forgetHost(host) // and what else Async keeps of it
	}
	switch {
	case c.Forget != nil:
		c.Forget(host)
	case c.Reconciler != nil && c.Reconciler.Power != nil:
		// Powers.Controller forgets a host it finds NotFound; one found
		// (re-created meanwhile) only gets a Controller, unused: no BMC
		// call either way.
		_, _ = c.Reconciler.Power(host)
	}
}

// Reconcile implements reconcile.Reconciler.
func (c *RebootController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != c.Namespace {
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(c.ReconcileTimeout, 2*time.Minute))
	defer cancel()
	if c.Client != nil {
		var bmh metal3.BareMetalHost
		if err := c.Client.Get(ctx, req.NamespacedName, &bmh); err != nil {
			if apierrors.IsNotFound(err) {
				c.forget(req.Name)
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if ours, why := c.Ownership.Ours(&bmh); !ours {
			if c.refuseOnce(req.Name, bmh.Annotations) && c.Recorder != nil {
				c.eventf(&bmh, nil, "Warning", "RebootRefused", "Reboot", "%s", why)
			}
			return ctrl.Result{}, nil
		}
		c.refuseOnce(req.Name, nil) // ours now: a later refusal is news
		// Every power command of this pass (and the background calls it
		// starts through Async) is watched: once the host, read again
		// uncached, is no longer rebootkit's, a command not yet sent is
		// not (watchOwner;
		// TestReview39ac_NormalPathOffSentAfterOperatorTookHostBack).
		ctx = withOwnerCheck(ctx, ownerCheck(cmp.Or[client.Reader](c.APIReader, c.Client), c.Ownership, req.NamespacedName, bmh.UID))
		var stop context.CancelFunc
		ctx, stop = watchOwner(ctx)
		defer stop()
		if bmh.Spec.DisablePowerOff {
			res, err := c.reconcileReset(ctx, &bmh)
			if errors.Is(err, ErrNoAdmissionPolicy) {
				return c.policyRefused(ctx, req, err), nil
			}
			if errors.Is(err, ErrBMCChanged) {
				if c.Recorder != nil {
					c.eventf(&bmh, nil, "Warning", "BMCChanged", "Reboot", "%v", err)
				}
				return c.bmcChangedResult(err), nil
			}
			if errors.Is(err, reboot.ErrNotFound) {
				c.forget(req.Name)
				return ctrl.Result{}, nil
			}
			return res, err
		}
		c.refuseResetOnce(req.Name, nil)
		if _, ok := bmh.Annotations[ResetRequestAnnotation]; ok || tokenOn(&bmh) {
			// spec.disablePowerOff was cleared during a reset: the normal
			// path takes the request, and the reset state goes first.
			err := c.dropReset(ctx, &bmh)
			if errors.Is(err, reboot.ErrConflict) || err == nil {
				return ctrl.Result{RequeueAfter: time.Millisecond}, nil
			}
			return ctrl.Result{}, err
		}
		if wait, ok := c.normalWithdrawnWait(ctx, &bmh); ok {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	res, err := c.Reconciler.Reconcile(ctx, req.Name)
	if errors.Is(err, reboot.ErrNotFound) {
		c.forget(req.Name)
		return ctrl.Result{}, nil // deleted
	}
	if errors.Is(err, reboot.ErrConflict) {
		// Someone wrote in between: decide again, backing off while it lasts.
		return ctrl.Result{RequeueAfter: c.conflictDelay(req.Name, c.hostFor(ctx, req))}, nil
	}
	c.conflictsEnd(req.Name)
	if errors.Is(err, ErrNoAdmissionPolicy) {
		return c.policyRefused(ctx, req, err), nil
	}
	if errors.Is(err, ErrBMCChanged) {
		// Nothing was sent to the new BMC; restoring spec.bmc (a change of
		// the host) brings the next pass.
		if c.Recorder != nil && c.Client != nil {
			var bmh metal3.BareMetalHost
			if c.Client.Get(ctx, req.NamespacedName, &bmh) == nil {
				c.eventf(&bmh, nil, "Warning", "BMCChanged", "Reboot", "%v", err)
			}
		}
		return c.bmcChangedResult(err), nil
	}
	if errors.Is(err, ErrTaskOverdue) {
		// The host's record holds it for a task its BMC accepted and no
		// replica saw end (Powers.Controller: sentHold, taskHold): the
		// operator is told, as for the in-memory one below
		// (TestTaskOverdueFromRecordTold), and the host is read again
		// within IdlePoll (its task monitor is read meanwhile).
		c.taskOverdueEvent(ctx, req, err)
		return ctrl.Result{RequeueAfter: cmp.Or(c.IdlePoll, time.Minute)}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if isInFlight(res.PowerErr) {
		if errors.Is(res.PowerErr, ErrTaskOverdue) {
			c.taskOverdueEvent(ctx, req, res.PowerErr) // left as it is until the BMC's task ends: say so
		}
		// The call goes on in the background; its end requeues the host.
		return ctrl.Result{RequeueAfter: cmp.Or(c.IdlePoll, time.Minute)}, nil
	}
	if isPowerOffDisabled(res.PowerErr) {
		// Refused, with an event, and not retried at once: only a change
		// of the host (or a minute) brings the next pass.
		if c.Recorder != nil && c.Client != nil {
			var bmh metal3.BareMetalHost
			if c.Client.Get(ctx, req.NamespacedName, &bmh) == nil {
				c.eventf(&bmh, nil, "Warning", "PowerOffRefused", "Reboot", "%v", res.PowerErr)
			}
		}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	if c.Recorder != nil && len(res.Decision.Warnings) > 0 {
		var bmh metal3.BareMetalHost
		if c.Client != nil && c.Client.Get(ctx, req.NamespacedName, &bmh) == nil {
			for _, w := range res.Decision.Warnings {
				c.eventf(&bmh, nil, "Warning", "RebootAnnotation", "Reboot", "%v", w)
			}
		}
	}
	if c.Recorder != nil && c.Client != nil && (res.PowerErr != nil || res.StateErr != nil) {
		c.powerEvent(ctx, req, res)
	}
	after := res.RequeueAfter
	if res.Requeue && (after <= 0 || after > time.Millisecond) {
		after = time.Millisecond // at once (a failed power call: the next decision acts on it)
	}
	if idle := cmp.Or(c.IdlePoll, time.Minute); after <= 0 || after > idle {
		after = idle // a host's power can change with no change of the object
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// SetupWithManager registers the controller: BareMetalHosts of the
// namespace, on generation or annotation changes.
func (c *RebootController) SetupWithManager(mgr ctrl.Manager) error {
	if c.Recorder == nil {
		c.Recorder = mgr.GetEventRecorder("rebootkit-reboot")
	}
	c.Client = mgr.GetClient()
	if c.APIReader == nil {
		c.APIReader = mgr.GetAPIReader()
	}
	if rh, ok := c.Reconciler.Hosts.(*RebootHosts); ok && rh.Corrupt == nil {
		rh.Corrupt = func(host string, err error) {
			var bmh metal3.BareMetalHost
			if c.Client.Get(context.Background(), types.NamespacedName{Namespace: c.Namespace, Name: host}, &bmh) == nil {
				c.eventf(&bmh, nil, "Warning", "RebootRecordCorrupt", "Reboot",
					"the reboot record of host %s did not parse and is replaced at the next write (%v); its fencing evidence is dropped", host, err)
			}
		}
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if c.Async != nil {
		ended := make(chan event.TypedGenericEvent[*metal3.BareMetalHost], 4096)
		c.Async.Done = func(name string) {
			select {
			case ended <- event.TypedGenericEvent[*metal3.BareMetalHost]{Object: &metal3.BareMetalHost{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}}:
			default: // full: the requeue after a minute covers it
			}
		}
		b = b.WatchesRawSource(source.Channel(ended, &handler.TypedEnqueueRequestForObject[*metal3.BareMetalHost]{}))
	}
	return b.
		Named(cmp.Or(c.Name, "rebootkit-reboot")).
		// The priority queue (controller-runtime's default) puts the
		// initial list's events after changes: a fencing request made
		// while a thousand hosts are first reconciled goes first.
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(c.MaxConcurrentReconciles, 32)}).
		For(&metal3.BareMetalHost{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, detachedChanged),
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == c.Namespace }),
		)).
		// An administrator's acceptance of a changed BMC (the record's
		// BMCChanged mark rewritten) reconciles the host at once.
		Watches(&v1alpha1.RebootRecord{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(markChanged,
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == c.Namespace }))).
		Complete(c)
}

// markChanged passes an update of a RebootRecord whose BMCChanged mark
// changed while set (an administrator accepted a BMC in it).
var markChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.RebootRecord)
		n, ok2 := e.ObjectNew.(*v1alpha1.RebootRecord)
		return ok1 && ok2 && o.Spec.BMCChanged != nil && n.Spec.BMCChanged != nil && *o.Spec.BMCChanged != *n.Spec.BMCChanged
	},
}

// detachedChanged passes a status update that makes a host detached or
// attached (the operator writes status.operationalStatus after the
// annotation: the host becomes rebootkit's then).
var detachedChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*metal3.BareMetalHost)
	n, ok2 := e.ObjectNew.(*metal3.BareMetalHost)
	return ok1 && ok2 && Detached(o) != Detached(n)
}}

// powerEvent reports a failed power call or state read of a pass as a
// Warning event on the host (the events API aggregates repeats), so that
// a BMC refusing the credentials for ever is seen.
func (c *RebootController) powerEvent(ctx context.Context, req ctrl.Request, res reboot.Result) {
	var bmh metal3.BareMetalHost
	if c.Client.Get(ctx, req.NamespacedName, &bmh) != nil {
		return
	}
	err, what := res.PowerErr, "power call"
	if err == nil {
		err, what = res.StateErr, "power state read"
	}
	c.eventf(&bmh, nil, "Warning", "RebootPowerError", "Reboot", "host %s: %s failed: %v; %s", req.Name, what, err, powerFix(err))
}

// bmcChangedResult requeues a host refused with ErrBMCChanged after a
// minute, or within IdlePoll while a power-on owed through its pinned BMC
// goes on (err also wraps ErrInFlight): nothing else is sent to its BMC.
func (c *RebootController) bmcChangedResult(err error) ctrl.Result {
	if isInFlight(err) {
		return ctrl.Result{RequeueAfter: cmp.Or(c.IdlePoll, time.Minute)}
	}
	return ctrl.Result{RequeueAfter: time.Minute}
}

// policyRefused reports a pass that Powers refused because the
// reboot-client admission policy is not in force (err wraps
// ErrNoAdmissionPolicy and names the fix) as a Warning event on the host,
// and requeues it after a minute at most (IdlePoll if shorter): nothing
// was sent to its BMC, and the policy is read again then.
func (c *RebootController) policyRefused(ctx context.Context, req ctrl.Request, err error) ctrl.Result {
	if c.Recorder != nil && c.Client != nil {
		var bmh metal3.BareMetalHost
		if c.Client.Get(ctx, req.NamespacedName, &bmh) == nil {
			c.eventf(&bmh, nil, "Warning", "AdmissionPolicyMissing", "Reboot", "%v", err)
		}
	}
	after := time.Minute
	if c.IdlePoll > 0 && c.IdlePoll < after {
		after = c.IdlePoll
	}
	return ctrl.Result{RequeueAfter: after}
}

// powerFix is the operator's fix for a failed BMC call.
func powerFix(err error) string {
	if errors.Is(err, ErrNoAdmissionPolicy) {
		return "install config/admission (kubectl apply -k config/admission), or run rebootkit-controller with --without-admission-policy (see the kube package doc for what is weaker then)"
	}
	if errors.Is(err, power.ErrAuth) || errors.Is(err, power.ErrBackoff) {
		return "check the username and password in the host's BMC credentials Secret"
	}
	return "check the BMC's address and reachability"
}

// taskOverdueEvent tells the operator, with a PowerTaskOverdue event on
// the host, that it is left as it is for a power command its BMC
// accepted for later whose task was not seen to end (err, an
// ErrTaskOverdue that names the task and the fix).
func (c *RebootController) taskOverdueEvent(ctx context.Context, req ctrl.Request, err error) {
	if c.Recorder == nil || c.Client == nil {
		return
	}
	var bmh metal3.BareMetalHost
	if c.Client.Get(ctx, req.NamespacedName, &bmh) == nil {
		c.eventf(&bmh, nil, "Warning", "PowerTaskOverdue", "Reboot", "%v", err)
	}
}
