package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// AdmissionPolicyName is the name of the ValidatingAdmissionPolicy (and of
// its binding) of config/admission: under it a reboot client may change
// nothing of a BareMetalHost but the reboot annotations.
const AdmissionPolicyName = "rebootkit-reboot-client"

// DefaultPolicySettle is how long the admission policy must have existed
// before a reboot became pending for Powers to trust a BMC change made
// during that reboot (the API server loads new policies within seconds).
const DefaultPolicySettle = 10 * time.Second

// ErrBMCChanged: a host's spec.bmc (address, credentials Secret or TLS
// verification) changed since its pending reboot was first seen, and the
// controller cannot tell that an identity with more than the reboot-client
// role changed it: no credentials are sent to the new BMC and no evidence
// taken from it. Also the error of every pass of a host whose RebootRecord
// is marked BMCChanged (its requests were removed in the write that
// changed its BMC) until the mark is removed or spec.bmc restored.
var ErrBMCChanged = errors.New("kube: BMC changed during a pending reboot")

// nextPin is the BMC pin the record keeps with status st: the one it has
// if it belongs to the same pending reboot, the host's spec.bmc if a
// reboot just became pending, nil if none is pending.
func nextPin(bmh *metal3.BareMetalHost, cur *v1alpha1.RebootRecord, st reboot.Status) *v1alpha1.BMCPin {
	// Pending as the reboot package says: set and not before LastPoweredOn.
	if st.PendingRebootSince.IsZero() || st.PendingRebootSince.Before(st.LastPoweredOn) {
		return nil
	}
	since := st.PendingRebootSince.UTC().Format(time.RFC3339Nano)
	if cur != nil && cur.Spec.HostUID == string(bmh.UID) && cur.Spec.BMC != nil && cur.Spec.BMC.PendingSince == since {
		return cur.Spec.BMC.DeepCopy()
	}
	return &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address, CredentialsName: bmh.Spec.BMC.CredentialsName,
		DisableCertificateVerification: bmh.Spec.BMC.DisableCertificateVerification, PendingSince: since}
}

// samePin reports whether the host's spec.bmc is the pinned one.
func samePin(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin) bool {
	return bmh.Spec.BMC.Address == pin.Address && bmh.Spec.BMC.CredentialsName == pin.CredentialsName &&
		bmh.Spec.BMC.DisableCertificateVerification == pin.DisableCertificateVerification
}

// checkPin returns nil if the controller may use bmh's spec.bmc, else an
// error wrapping ErrBMCChanged (no BMC call was made). The record and the
// policy are read directly (Powers.Secrets), never from a cache.
//
//   - A record marked BMCChanged (see below) refuses every BMC but the one
//     it names until an identity with more than the reboot-client role
//     removes the mark (restoring spec.bmc clears it).
//   - With no pin, or the pinned BMC, the BMC is used.
//   - A BMC other than the pinned one is used if the admission policy
//     (and its denying binding) has been in force since DefaultPolicySettle
//     (Powers.PolicySettle) before the pin's reboot became pending, so that
//     whoever changed it has more than the reboot-client role.
//   - Else, while the host carries a request, it is refused.
//   - Else (the requests are gone with the BMC changed, as one write of a
//     reboot client can do): if the record's evidence says the pending
//     reboot powered the host off, it is used to power the host back on
//     (no evidence is taken from it: no reboot is pending); otherwise the
//     pin is dropped and the record marked BMCChanged, with no BMC call,
//     so that the host is neither locked out by the old pin nor handed to
//     the new BMC.
func (p *Powers) checkPin(ctx context.Context, bmh *metal3.BareMetalHost) error {
	var rec v1alpha1.RebootRecord
	err := p.Secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: bmh.Name}, &rec)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: host %s: reboot record: %w", bmh.Name, err)
	}
	if rec.Spec.HostUID != string(bmh.UID) {
		return nil
	}
	if ch := rec.Spec.BMCChanged; ch != nil {
		if !samePin(bmh, ch) {
			return fmt.Errorf("%w: the BMC of host %s (address %q, credentials %q) changed while a reboot was pending on %q "+
				"(credentials %q), and a reboot client may have changed it: rebootkit sends it no credentials and takes no evidence "+
				"from it (the host may be off). Check the host's BMC; then, with more than the reboot-client role, accept it with "+
				"kubectl -n %s patch rebootrecord %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/bmcChanged\"}]', or restore spec.bmc",
				ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, ch.Address, ch.CredentialsName, p.Namespace, bmh.Name)
		}
		// Restored: the mark goes (a later change is judged afresh).
		if w, ok := p.Client.(client.Writer); ok {
			if err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"bmcChanged": nil}})); err != nil {
				return mapError("record of", p.Namespace, bmh.Name, err)
			}
		}
	}
	pin := rec.Spec.BMC
	if pin == nil || samePin(bmh, pin) {
		return nil
	}
	since, err := time.Parse(time.RFC3339Nano, pin.PendingSince)
	if err != nil {
		return fmt.Errorf("%w: host %s: its record's pin does not parse", ErrBMCChanged, bmh.Name)
	}
	settle := p.PolicySettle
	if settle <= 0 {
		settle = DefaultPolicySettle
	}
	perr := PolicyInForce(ctx, p.Secrets, p.PolicyName, since, settle)
	if perr == nil {
		return nil
	}
	if !carriesRequest(bmh) {
		if p.pinnedReadsOff(ctx, bmh, pin) {
			// The pinned BMC (the host's when the reboot became
			// pending) reads Off: the withdrawn reboot may have powered
			// the host off, so it is powered back on through the BMC it
			// now has (the host must not stay off); no reboot is
			// pending, so no evidence is taken, and the pass drops the
			// pin.
			return nil
		}
		if w, ok := p.Client.(client.Writer); ok {
			mark := map[string]any{"bmc": nil, "bmcChanged": pin}
			if err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": mark})); err != nil {
				return mapError("record of", p.Namespace, bmh.Name, err)
			}
		}
		return fmt.Errorf("%w: the reboot requests of host %s were removed and its BMC changed (address %q, credentials %q; "+
			"pinned %q, credentials %q) while a reboot client may have made the change (%v): the pin is dropped with no BMC call, "+
			"and rebootkit sends the new BMC no credentials and takes no evidence from it until it is accepted: with more than "+
			"the reboot-client role, check it and run kubectl -n %s patch rebootrecord %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/bmcChanged\"}]', or restore spec.bmc",
			ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, pin.Address, pin.CredentialsName, perr, p.Namespace, bmh.Name)
	}
	return fmt.Errorf("%w: the BMC of host %s (address %q, credentials %q) is not the one it had when its reboot became pending "+
		"(address %q, credentials %q), and a reboot client may have changed it (%v): rebootkit sends it no credentials "+
		"and takes no evidence from it; restore spec.bmc, or install config/admission and ask for the reboot again",
		ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, pin.Address, pin.CredentialsName, perr)
}

// pinnedReadsOff reports whether the BMC pin names (bmh's BMC when its
// reboot became pending, trusted with its credentials) reads Off: one
// State call through the pool, under a name of its own that is forgotten
// after. Any failure is false (not known to be off).
func (p *Powers) pinnedReadsOff(ctx context.Context, bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin) bool {
	old := bmh.DeepCopy()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = pin.Address, pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = pin.DisableCertificateVerification
	key := bmh.Name + "\x00pinned"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		return false
	}
	defer p.pool().Forget(key)
	s, err := pc.State(ctx)
	return err == nil && s == power.StateOff
}

// ErrNoAdmissionPolicy: the reboot-client admission policy of
// config/admission, or a binding of it that denies, is not in force (or
// was not early enough).
var ErrNoAdmissionPolicy = errors.New("kube: the reboot-client admission policy is not in force")

// PolicyInForce returns nil if the reboot-client admission policy name
// ("" is AdmissionPolicyName) and a binding of the same name that denies
// with it have both existed since settle before t (on r, read directly),
// else an error wrapping ErrNoAdmissionPolicy that says why. It cannot
// tell whether the binding's selectors cover the hosts' namespace: the
// binding shipped in config/admission has none.
func PolicyInForce(ctx context.Context, r client.Reader, name string, t time.Time, settle time.Duration) error {
	if name == "" {
		name = AdmissionPolicyName
	}
	var pol admissionv1.ValidatingAdmissionPolicy
	if err := r.Get(ctx, types.NamespacedName{Name: name}, &pol); err != nil {
		return fmt.Errorf("%w: policy %s cannot be read (%v); install config/admission", ErrNoAdmissionPolicy, name, apierrors.ReasonForError(err))
	}
	var b admissionv1.ValidatingAdmissionPolicyBinding
	if err := r.Get(ctx, types.NamespacedName{Name: name}, &b); err != nil {
		return fmt.Errorf("%w: binding %s cannot be read (%v); install config/admission", ErrNoAdmissionPolicy, name, apierrors.ReasonForError(err))
	}
	if b.Spec.PolicyName != name || !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) {
		return fmt.Errorf("%w: binding %s does not deny with policy %s", ErrNoAdmissionPolicy, name, name)
	}
	for _, o := range []time.Time{pol.CreationTimestamp.Time, b.CreationTimestamp.Time} {
		if o.Add(settle).After(t) {
			return fmt.Errorf("%w: policy %s was installed after %s", ErrNoAdmissionPolicy, name, t.Add(-settle).UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// carriesRequest reports whether bmh carries a reboot request: the bare
// annotation or a keyed one.
func carriesRequest(bmh *metal3.BareMetalHost) bool {
	for k := range bmh.Annotations {
		if k == reboot.Annotation || strings.HasPrefix(k, reboot.AnnotationPrefix) {
			return true
		}
	}
	return false
}
