package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

// LegacyStatusAnnotation is where earlier versions of this package kept
// the reboot Status, on the BareMetalHost itself. Any client that may ask
// for a reboot could write it (and so forge the fencing evidence): it is
// never read, and the controller's next write removes it. The Status lives
// in the host's RebootRecord.
const LegacyStatusAnnotation = "reboot.rebootkit.io/status"

// ErrCorruptRecord: a RebootRecord whose status does not parse. The host's
// Status then counts as empty (no evidence: Fenced is false, a pending
// request is seen as new), which is always safe, and the controller's next
// write replaces the record.
var ErrCorruptRecord = errors.New("kube: corrupt reboot record")

// RebootHosts is a reboot.HostStore over the BareMetalHosts of one
// namespace: the reboot controller's records (remediation.RebootAPIHosts is
// another thing, the remediation's adapter that requests reboots through
// such a store). The reboot requests are the hosts' annotations; the reboot
// Status (the fencing evidence) lives in a RebootRecord of the same name
// in the namespace, an object only the controller may write (the clients
// that ask for reboots need update on BareMetalHosts, which lets them write
// any annotation).
//
// Update writes the annotations first (a JSON merge patch of only the
// annotations that change, carrying the resourceVersion read: a
// compare-and-swap, sent even when nothing changes, so that a request
// added since the read stops the decision), then the record (created, or
// patched with its own resourceVersion). A host's Version joins both
// versions. The API server's conflict is reboot.ErrConflict, a missing
// host reboot.ErrNotFound.
type RebootHosts struct {
	Client    client.Client
	Namespace string
	// Corrupt, if set, is told about a record that does not parse (the
	// controller turns it into an event); the host is not wedged: see
	// ErrCorruptRecord.
	Corrupt func(host string, err error)
	// Informers, if set (a manager's GetCache()), make the store a
	// reboot.HostWatcher: the reboot Client's waits then answer as soon
	// as the controller writes, instead of polling.
	Informers cache.Informers
	// Reader, if set, is what Get and Update read the BareMetalHost and
	// its record with (default Client); writes go through Client. The
	// remediation's store (NewRemediationReconciler) must read the API
	// server, not a cache (manager.GetAPIReader, as Machines.Reader): a
	// cache may not yet show the request the last pass wrote, and the
	// removal of a gone Machine's request would find nothing to remove
	// (Update's compare-and-swap is on the version read here).
	Reader client.Reader
}

// reader is Reader, or Client.
func (s *RebootHosts) reader() client.Reader {
	if s.Reader != nil {
		return s.Reader
	}
	return s.Client
}

var _ reboot.HostStore = (*RebootHosts)(nil)

// Deprovisioned reports whether a BareMetalHost is deprovisioned or being
// deprovisioned (the reboot package then removes every reboot annotation
// and leaves its power to provisioning).
func Deprovisioned(h *metal3.BareMetalHost) bool {
	switch h.Status.Provisioning.State {
	case metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, metal3.StateDeleting:
		return true
	}
	return !h.DeletionTimestamp.IsZero()
}

// Unprovisioned reports whether a BareMetalHost carries no provisioned
// image (available or ready: deprovisioned, or never provisioned), as
// OperatorHosts requires of a host with spec.online false before it
// counts as released (reboot.Host.Unprovisioned).
func Unprovisioned(h *metal3.BareMetalHost) bool {
	switch h.Status.Provisioning.State {
	case metal3.StateAvailable, metal3.StateReady:
		return true
	}
	return false
}

// Get implements reboot.HostStore.
func (s *RebootHosts) Get(ctx context.Context, name string) (reboot.Host, error) {
	var bmh metal3.BareMetalHost
	if err := s.reader().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &bmh); err != nil {
		return reboot.Host{}, mapError("get", s.Namespace, name, err)
	}
	var rec v1alpha1.RebootRecord
	err := s.reader().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &rec)
	switch {
	case apierrors.IsNotFound(err):
		return s.toHost(&bmh, nil), nil
	case err != nil:
		return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, name, err)
	}
	return s.toHost(&bmh, &rec), nil
}

// version joins the host's and the record's resourceVersions.
func version(bmh, rec string) string { return bmh + "/" + rec }

func splitVersion(v string) (bmh, rec string) {
	bmh, rec, _ = strings.Cut(v, "/")
	return bmh, rec
}

func (s *RebootHosts) toHost(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord) reboot.Host {
	h := reboot.Host{Name: bmh.Name, Version: version(bmh.ResourceVersion, ""), Annotations: maps.Clone(bmh.Annotations),
		Online: bmh.Spec.Online, Deprovisioned: Deprovisioned(bmh), Unprovisioned: Unprovisioned(bmh)}
	delete(h.Annotations, LegacyStatusAnnotation)
	if rec == nil {
		return h
	}
	h.Version = version(bmh.ResourceVersion, rec.ResourceVersion)
	if rec.Spec.HostUID != string(bmh.UID) {
		// The record of an earlier host of the same name: start afresh
		// (the next write replaces it).
		return h
	}
	if rec.Spec.Status != "" {
		if err := json.Unmarshal([]byte(rec.Spec.Status), &h.Status); err != nil {
			h.Status = reboot.Status{}
			if s.Corrupt != nil {
				s.Corrupt(bmh.Name, fmt.Errorf("%w %s/%s: %v", ErrCorruptRecord, s.Namespace, bmh.Name, err))
			}
		}
	}
	return h
}

// Update implements reboot.HostStore.
func (s *RebootHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	bmhVersion, recVersion := splitVersion(h.Version)
	var bmh metal3.BareMetalHost
	if err := s.reader().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: h.Name}, &bmh); err != nil {
		return reboot.Host{}, mapError("update", s.Namespace, h.Name, err)
	}
	if bmh.ResourceVersion != bmhVersion {
		return reboot.Host{}, fmt.Errorf("kube: host %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
	}
	raw, err := json.Marshal(h.Status)
	if err != nil {
		return reboot.Host{}, err
	}
	// 1. The annotations, compare-and-swap on the version read (also when
	// none changes: the check is what makes a request added since the read
	// stop this decision).
	ann := maps.Clone(h.Annotations)
	delete(ann, LegacyStatusAnnotation)
	if err := s.Client.Patch(ctx, &bmh, casPatch(bmhVersion, metadataPatch(nil, mapPatch(bmh.Annotations, ann)))); err != nil {
		return reboot.Host{}, mapError("update", s.Namespace, h.Name, err)
	}
	// 2. The record, if the Status changed (a client writing its request
	// changes none, and may not write records).
	var cur v1alpha1.RebootRecord
	switch err := s.reader().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: h.Name}, &cur); {
	case apierrors.IsNotFound(err):
		if recVersion != "" {
			return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
		}
		if h.Status.Equal(reboot.Status{}) {
			return s.toHost(&bmh, nil), nil
		}
	case err != nil:
		return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, h.Name, err)
	default:
		if recVersion == "" && firstSightOnly(&cur, &bmh) {
			// Read as none, and since holding only the BMC a pass of
			// this host first saw (Powers' firstSight): the same
			// (empty) Status, written over under compare-and-swap.
			recVersion = cur.ResourceVersion
		}
		if cur.ResourceVersion != recVersion {
			return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
		}
		if was := s.toHost(&bmh, &cur); was.Status.Equal(h.Status) {
			return was, nil
		}
	}
	pin, mark := nextPin(&bmh, &cur, h.Status)
	// The reconciler writes the Status only in a pass whose power
	// controller checkPin gave, so spec.bmc (unchanged since: the
	// compare-and-swap above) is one it let use: the host's last BMC.
	var last *v1alpha1.BMCPin
	if cur.Spec.HostUID == string(bmh.UID) {
		last = cur.Spec.LastBMC
	}
	last = nextLast(&bmh, last, time.Now())
	rec := v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: h.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: metal3.GroupVersion.String(), Kind: "BareMetalHost",
			Name: bmh.Name, UID: bmh.UID, BlockOwnerDeletion: ptr.To(false)}}},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), Status: string(raw), BMC: pin, BMCChanged: mark, LastBMC: last}}
	if recVersion == "" {
		err = s.Client.Create(ctx, &rec)
		if apierrors.IsAlreadyExists(err) {
			return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
		}
	} else {
		// The pin explicitly: a merge patch leaves what it omits.
		spec := map[string]any{"hostUID": rec.Spec.HostUID, "status": rec.Spec.Status, "bmc": rec.Spec.BMC, "lastBMC": last}
		if mark != nil {
			spec["bmcChanged"] = mark
		}
		err = s.Client.Patch(ctx, &rec, casPatch(recVersion, map[string]any{"spec": spec,
			"metadata": map[string]any{"ownerReferences": rec.OwnerReferences}}))
	}
	if apierrors.IsNotFound(err) { // deleted since the read: decide again
		return reboot.Host{}, fmt.Errorf("kube: reboot record %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
	}
	if err != nil {
		return reboot.Host{}, mapError("record of", s.Namespace, h.Name, err)
	}
	return s.toHost(&bmh, &rec), nil
}

// mapError maps API errors to the reboot package's sentinels.
func mapError(op, ns, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, reboot.ErrNotFound)
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, reboot.ErrConflict)
	}
	return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, err)
}
