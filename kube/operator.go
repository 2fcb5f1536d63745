package kube

import (
	"cmp"
	"context"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

// Ownership: never two actors on one host's power. In a metal3 cluster the
// baremetal-operator owns each host's power: it implements the
// reboot.metal3.io annotations itself and powers hosts by spec.online. So
// rebootkit's RebootController powers only the hosts the operator does not
// manage, and a remediation drives the others through the operator's own
// reboot annotation and status, as the Cluster API provider for metal3
// does.
type Ownership struct {
	// NoOperator: no baremetal-operator runs in the cluster; every host is
	// rebootkit's.
	NoOperator bool
	// Unmanaged selects hosts the operator does not manage (besides those
	// it has detached, see Detached); nil selects none. Its labels must be
	// ones reboot clients cannot write: config/admission denies them every
	// label change.
	Unmanaged labels.Selector
}

// Detached reports whether the baremetal-operator has let go of bmh: the
// annotation metal3.DetachedAnnotation asks for it, and
// status.operationalStatus "detached" says the operator did it (it writes
// that only once Ironic's detach is done, and only in the provisioned,
// externally provisioned, ready and available states). Either alone is
// not enough: the annotation before the detach completes (or in a state
// the operator does not detach in), and the status after the annotation
// is removed (the operator then re-registers the host and powers it
// again). See the package doc, "The baremetal-operator's rules".
func Detached(bmh *metal3.BareMetalHost) bool {
	_, asked := bmh.Annotations[metal3.DetachedAnnotation]
	return asked && bmh.Status.OperationalStatus == metal3.OperationalStatusDetached
}

// Ours reports whether rebootkit powers bmh (and why not, if not).
func (o Ownership) Ours(bmh *metal3.BareMetalHost) (bool, string) {
	if o.NoOperator {
		return true, ""
	}
	if Detached(bmh) {
		return true, ""
	}
	if o.Unmanaged != nil && o.Unmanaged.Matches(labels.Set(bmh.Labels)) {
		return true, ""
	}
	if _, asked := bmh.Annotations[metal3.DetachedAnnotation]; asked {
		return false, fmt.Sprintf("host %s has the annotation %s but the baremetal-operator has not detached it yet "+
			"(status.operationalStatus %q, provisioning state %q; it detaches only provisioned, externally provisioned, ready "+
			"and available hosts): the operator still powers it, so rebootkit does not; wait for operationalStatus %q",
			bmh.Name, metal3.DetachedAnnotation, bmh.Status.OperationalStatus, bmh.Status.Provisioning.State, metal3.OperationalStatusDetached)
	}
	return false, fmt.Sprintf("host %s is managed by the baremetal-operator, which powers it and serves its reboot annotations itself; "+
		"rebootkit powers only hosts the operator does not manage (detached: annotation %s and status.operationalStatus %q, "+
		"or a label selector given to rebootkit)",
		bmh.Name, metal3.DetachedAnnotation, metal3.OperationalStatusDetached)
}

// DefaultOperatorStaleReads is how old the baremetal-operator's power
// reading may be: Ironic syncs a node's power state about every 60 s and
// the operator polls it about every 60 s, with a margin.
const DefaultOperatorStaleReads = 3 * time.Minute

// OperatorHosts is a remediation.HostStore for hosts the
// baremetal-operator powers: the remediation's request is the operator's
// own phased reboot annotation (remediation.RebootAnnotation, a
// reboot.metal3.io/{key}), and what it did is read from the host's status
// as the operator writes it.
//
// status.poweredOn is a power reading, with the reboot package's evidence
// rules: it may echo the hardware's state up to StaleReads old (Ironic's
// cached power state, synced periodically, and the operator's poll), so a
// reading of Off at instant r proves only that the hardware was off at
// some instant at or after r-StaleReads. Fenced: the request is there and
// the status, read now, says the host is not powered on, and
// now-StaleReads is after the request (its second, floored): the host was
// off after the request. That holds whether the operator wrote the status
// before or after the request: it writes status only when something
// changes, so a host it already showed off is fenced too. PoweredOn: the
// request is gone and a status written in a later second than the request
// (status.lastUpdated) says it is on. The evidence rests on the operator
// running (its status is at most StaleReads behind the hardware), and on
// its clock and Ironic's agreeing with the remediation's (the reboot
// package's assumption A3).
//
// It never sets remediation.Host.OnConfirmedAt: a BareMetalHost's status
// records no time of a power-on read On after the last power-off
// (status.poweredOn is a bare reading, status.lastUpdated the time of
// any status write), so a host that is off now gives no bound on when it
// was last on. A gone Machine's admission whose recorded request has no
// time thus holds a host it moved from (or its own) that is off, parked
// by its owner included, until the operator shows it on, or the owner
// releases it (Offline), or a person who checked it is off for no
// request of the Machine's removes the Machine's name from the admission
// record (remediation.ErrHostHeld): unknown errs towards holding
// (TestReviewSgab_OperatorHostsGoneMemberNoTimeParkedHostHoldsForEver,
// a documented trade-off).
type OperatorHosts struct {
	Client    client.Client
	Namespace string
	// HostOf maps a Machine to its host ("" with a nil error: none).
	HostOf func(ctx context.Context, machine string) (string, error)
	// Now is the clock (default time.Now); StaleReads the reading's age
	// bound (default DefaultOperatorStaleReads).
	Now        func() time.Time
	StaleReads time.Duration
	// Reader, if set, is what the hosts are read with (default Client).
	// Give it the manager's API reader (manager.GetAPIReader), as
	// Machines.Reader: a cache may not yet show the request the last
	// pass wrote, and a request removal or a held check (before a gone
	// Machine's admission is released) that reads it there removes
	// nothing and sees the host free, leaving the request on it for good.
	Reader client.Reader
}

var _ remediation.HostStore = (*OperatorHosts)(nil)

func (s *OperatorHosts) host(ctx context.Context, machine string) (*metal3.BareMetalHost, error) {
	name, err := s.HostOf(ctx, machine)
	if err != nil || name == "" {
		return nil, err
	}
	return s.named(ctx, name)
}

// named reads the BareMetalHost name (nil if there is none).
func (s *OperatorHosts) named(ctx context.Context, name string) (*metal3.BareMetalHost, error) {
	var bmh metal3.BareMetalHost
	var rd client.Reader = s.Client
	if s.Reader != nil {
		rd = s.Reader
	}
	err := rd.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &bmh)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kube: host %s/%s: %w", s.Namespace, name, err)
	}
	return &bmh, nil
}

// after reports whether a status written at t (floored to seconds) was
// written after instant at.
func after(t *time.Time, at time.Time) bool {
	return t != nil && !t.Before(at.Truncate(time.Second).Add(time.Second))
}

// Get implements remediation.HostStore.
func (s *OperatorHosts) Get(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	// The clock is read before the host: the reading is no older than now.
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	// Name is the host the Machine maps to now; the other fields answer
	// for the request's host (req.Host) when it is set (they differ after
	// a move), as remediation.RebootAPIHosts does.
	name, err := s.HostOf(ctx, machine)
	if err != nil {
		return remediation.Host{}, err
	}
	return s.read(ctx, now, name, req)
}

// read is Get for the host name HostOf named (or the request's host), the
// clock read before it at now.
func (s *OperatorHosts) read(ctx context.Context, now time.Time, name string, req remediation.Request) (remediation.Host, error) {
	target := cmp.Or(req.Host, name)
	if target == "" {
		return remediation.Host{Missing: true, Power: power.StateUnknown}, nil
	}
	bmh, err := s.named(ctx, target)
	if err != nil {
		return remediation.Host{}, err
	}
	if bmh == nil {
		if target != name && name != "" {
			// The request's host is gone, and its request with it.
			return remediation.Host{Name: name, Power: power.StateUnknown}, nil
		}
		return remediation.Host{Missing: true, Power: power.StateUnknown}, nil
	}
	v, present := bmh.Annotations[remediation.RebootAnnotation]
	// Another Machine's request (a host re-used) is not this one's.
	present = present && remediation.SameMachine(v, req.Value)
	out := remediation.Host{Name: name, Missing: name == "", RebootAnnotation: present, Requested: present && req.Value != "" && v == req.Value, Power: power.StateUnknown}
	if present {
		out.RequestT = remediation.RequestTime(v)
	}
	var updated *time.Time
	if bmh.Status.LastUpdated != nil {
		updated = &bmh.Status.LastUpdated.Time
	}
	if bmh.Status.PoweredOn {
		out.Power = power.StateOn
	} else {
		out.Power = power.StateOff
	}
	if req.Value != "" && !req.At.IsZero() {
		stale := cmp.Or(s.StaleReads, DefaultOperatorStaleReads)
		offAfter := now.Add(-stale) // the earliest the reading now may describe
		// The reading describes an instant after the request: written
		// after it, or read more than StaleReads after it.
		readLate := offAfter.After(req.At.Truncate(time.Second).Add(time.Second))
		since := after(updated, req.At) || readLate
		out.Fenced = out.Requested && !bmh.Status.PoweredOn && readLate
		// "On" after the request needs the same evidence as "off": a
		// status written soon after the request may echo Ironic's
		// cached state from before it, so it counts only when written,
		// or read, more than StaleReads after the request.
		onSince := bmh.Status.PoweredOn && (readLate || after(updated, req.At.Add(stale)))
		out.PoweredOn = !present && onSince
		// Held (remediation.Held) until the operator shows the host on
		// after the request: off after it, or a reading that cannot
		// show it on since: off from before, on from before the
		// request and young enough that the operator may be powering
		// it off for it unseen, or on in a status written within
		// StaleReads of the request (a possible echo of before it).
		out.OffAfterRequest = !bmh.Status.PoweredOn && since
		out.RebootPending = !since || bmh.Status.PoweredOn && !onSince
	}
	// With spec.online false, no request of the Machine's on it, and
	// deprovisioned (in the pool: available), the operator keeps the host
	// off for its owner and powers it on for no request. spec.online
	// false alone is one reading of a wish its owner may take back (a
	// blip): the operator would then power the host on, and a release
	// made on it would leave the host off for nobody's count.
	out.Offline = !bmh.Spec.Online && !present && Unprovisioned(bmh)
	return out, nil
}

// requestHost reads the host the request req was written to (req.Host),
// or, with req.Host empty, the one HostOf names (nil if there is none).
func (s *OperatorHosts) requestHost(ctx context.Context, machine string, req remediation.Request) (*metal3.BareMetalHost, error) {
	if req.Host != "" {
		return s.named(ctx, req.Host)
	}
	return s.host(ctx, machine)
}

// AddRebootAnnotation implements remediation.HostStore (a merge patch of
// the one annotation, with the resourceVersion read): on req.Host when it
// is set (the host the Reconciler persisted before the write), else on
// the host HostOf names.
func (s *OperatorHosts) AddRebootAnnotation(ctx context.Context, machine string, req remediation.Request) error {
	bmh, err := s.requestHost(ctx, machine, req)
	if err != nil {
		return err
	}
	return s.patchHost(ctx, machine, bmh, req.Value)
}

// RemoveRebootAnnotation implements remediation.HostStore.
func (s *OperatorHosts) RemoveRebootAnnotation(ctx context.Context, machine string) error {
	return s.patch(ctx, machine, nil)
}

// RemoveRebootRequest implements remediation.RequestRemover: it removes
// the annotation from req.Host (the host HostOf names if it is not set),
// if its value is this Machine's (remediation.SameMachine with
// req.Value).
func (s *OperatorHosts) RemoveRebootRequest(ctx context.Context, machine string, req remediation.Request) error {
	if req.Host == "" {
		return s.patch(ctx, machine, nil)
	}
	bmh, err := s.named(ctx, req.Host)
	if err != nil || bmh == nil {
		return err
	}
	if v, ok := bmh.Annotations[remediation.RebootAnnotation]; !ok || !remediation.SameMachine(v, req.Value) {
		return nil
	}
	err = s.Client.Patch(ctx, bmh, casPatch(bmh.ResourceVersion, metadataPatch(nil, map[string]any{remediation.RebootAnnotation: nil})))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: host %s/%s: %w", s.Namespace, bmh.Name, remediation.ErrConflict)
	}
	return err
}

func (s *OperatorHosts) patch(ctx context.Context, machine string, value any) error {
	bmh, err := s.host(ctx, machine)
	if err != nil {
		return err
	}
	return s.patchHost(ctx, machine, bmh, value)
}

// patchHost sets (value) or removes (nil) the reboot annotation of bmh
// (nil: the Machine has no host).
func (s *OperatorHosts) patchHost(ctx context.Context, machine string, bmh *metal3.BareMetalHost, value any) error {
	if bmh == nil {
		if value == nil {
			return nil
		}
		return fmt.Errorf("kube: machine %s has no host: %w", machine, remediation.ErrNotFound)
	}
	if _, ok := bmh.Annotations[remediation.RebootAnnotation]; !ok && value == nil {
		return nil
	}
	err := s.Client.Patch(ctx, bmh, casPatch(bmh.ResourceVersion, metadataPatch(nil, map[string]any{remediation.RebootAnnotation: value})))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: host %s/%s: %w", s.Namespace, bmh.Name, remediation.ErrConflict)
	}
	return err
}

// OwnedHosts is the remediation.HostStore that keeps one actor per host:
// hosts rebootkit powers (Ownership.Ours) go through the reboot API served
// by the RebootController (Ours), the others through the
// baremetal-operator (Operator).
type OwnedHosts struct {
	Ownership Ownership
	Ours      remediation.HostStore
	Operator  *OperatorHosts
}

var (
	_ remediation.HostStore      = (*OwnedHosts)(nil)
	_ remediation.RequestRemover = (*OwnedHosts)(nil)
	_ remediation.RequestReader  = (*OwnedHosts)(nil)
	_ remediation.RequestReader  = (*OperatorHosts)(nil)
	_ remediation.RequestFinder  = (*OwnedHosts)(nil)
)

// RebootRequests implements remediation.RequestFinder: the reboot
// requests on the namespace's BareMetalHosts (rebootkit's and the
// operator's alike carry remediation.RebootAnnotation), but those naming
// a PowerCycleRemediation of the namespace (the
// ExternalRemediationController's, which carry the same annotation): a
// Machine remediation's sweep for a gone Machine's request never removes
// another controller's. A cluster without the PowerCycleRemediation
// resource has none.
func (s *OwnedHosts) RebootRequests(ctx context.Context) ([]remediation.Request, error) {
	var hosts metal3.BareMetalHostList
	if err := s.Operator.Client.List(ctx, &hosts, client.InNamespace(s.Operator.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list hosts: %w", err)
	}
	var pcrs v1alpha1.PowerCycleRemediationList
	err := s.Operator.Client.List(ctx, &pcrs, client.InNamespace(s.Operator.Namespace))
	if err != nil && !meta.IsNoMatchError(err) && !runtime.IsNotRegisteredError(err) {
		return nil, fmt.Errorf("kube: list power-cycle remediations: %w", err)
	}
	others := func(v string) bool {
		for _, p := range pcrs.Items {
			if remediation.SameMachine(v, remediation.RebootValue(string(p.UID), time.Time{})) {
				return true
			}
		}
		return false
	}
	var out []remediation.Request
	for _, h := range hosts.Items {
		if v, ok := h.Annotations[remediation.RebootAnnotation]; ok && !others(v) {
			out = append(out, remediation.Request{Value: v, Host: h.Name})
		}
	}
	return out, nil
}

// ReadRequest implements remediation.RequestReader: the host req.Host
// read for req by the store its ownership picks, without asking HostOf
// (the Machine may be gone); a host that is gone reads as Missing. With
// req.Host empty it is Get.
func (s *OwnedHosts) ReadRequest(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	if req.Host == "" {
		return s.Get(ctx, machine, req)
	}
	bmh, err := s.Operator.named(ctx, req.Host)
	if err != nil {
		return remediation.Host{}, err
	}
	if bmh == nil {
		return remediation.Host{Missing: true, Power: power.StateUnknown}, nil
	}
	if ours, _ := s.Ownership.Ours(bmh); !ours {
		return s.Operator.ReadRequest(ctx, machine, req)
	}
	if rr, ok := s.Ours.(remediation.RequestReader); ok {
		return rr.ReadRequest(ctx, machine, req)
	}
	return s.Ours.Get(ctx, machine, req)
}

// ReadRequest implements remediation.RequestReader: Get on req.Host
// without asking HostOf (the Machine may be gone). With req.Host empty it
// is Get.
func (s *OperatorHosts) ReadRequest(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	if req.Host == "" {
		return s.Get(ctx, machine, req)
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	return s.read(ctx, now, req.Host, req)
}

// pick is the store for the host of req: req.Host when it is set (the
// host the request was, or is to be, written to: its ownership decides,
// whatever HostOf answers now), else the host HostOf names.
func (s *OwnedHosts) pick(ctx context.Context, machine string, req remediation.Request) (remediation.HostStore, error) {
	bmh, err := s.Operator.requestHost(ctx, machine, req)
	if err != nil {
		return nil, err
	}
	if bmh != nil {
		if ours, _ := s.Ownership.Ours(bmh); !ours {
			return s.Operator, nil
		}
	}
	return s.Ours, nil
}

// Get implements remediation.HostStore, by the store of the request's host
// (req.Host when set, else the one HostOf names).
func (s *OwnedHosts) Get(ctx context.Context, machine string, req remediation.Request) (remediation.Host, error) {
	h, err := s.pick(ctx, machine, req)
	if err != nil {
		return remediation.Host{}, err
	}
	return h.Get(ctx, machine, req)
}

// AddRebootAnnotation implements remediation.HostStore: on req.Host when
// it is set (by the store its ownership picks), else on the host HostOf
// names.
func (s *OwnedHosts) AddRebootAnnotation(ctx context.Context, machine string, req remediation.Request) error {
	h, err := s.pick(ctx, machine, req)
	if err != nil {
		return err
	}
	return h.AddRebootAnnotation(ctx, machine, req)
}

// RemoveRebootAnnotation implements remediation.HostStore.
func (s *OwnedHosts) RemoveRebootAnnotation(ctx context.Context, machine string) error {
	h, err := s.pick(ctx, machine, remediation.Request{})
	if err != nil {
		return err
	}
	return h.RemoveRebootAnnotation(ctx, machine)
}

// RemoveRebootRequest implements remediation.RequestRemover: the request
// is removed from the host it was written to (req.Host), by the store
// that host's ownership picks, without asking HostOf (the Machine may be
// gone, or moved); with req.Host empty, by the store picked for the
// Machine, as RemoveRebootAnnotation. Only a request of this Machine's
// (remediation.SameMachine with req.Value) is removed.
func (s *OwnedHosts) RemoveRebootRequest(ctx context.Context, machine string, req remediation.Request) error {
	if req.Host == "" {
		h, err := s.pick(ctx, machine, req)
		if err != nil {
			return err
		}
		if rr, ok := h.(remediation.RequestRemover); ok {
			return rr.RemoveRebootRequest(ctx, machine, req)
		}
		return h.RemoveRebootAnnotation(ctx, machine)
	}
	bmh, err := s.Operator.named(ctx, req.Host)
	if err != nil || bmh == nil {
		return err // a host that is gone holds no request
	}
	if ours, _ := s.Ownership.Ours(bmh); !ours {
		return s.Operator.RemoveRebootRequest(ctx, machine, req)
	}
	if rr, ok := s.Ours.(remediation.RequestRemover); ok {
		return rr.RemoveRebootRequest(ctx, machine, req)
	}
	return s.Ours.RemoveRebootAnnotation(ctx, machine)
}
