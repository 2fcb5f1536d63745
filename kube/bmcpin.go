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
// taken from it.
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

// checkPin returns nil if the controller may use bmh's spec.bmc: no reboot
// is pending (none pinned, or the host carries no reboot request any more:
// as when nothing was pending, a BMC changed then is trusted only as far as
// config/admission keeps reboot clients from changing it), or the BMC is
// the one pinned when it became pending, or the admission policy (and its
// denying binding) has been in force since DefaultPolicySettle
// (Powers.PolicySettle) before that, so that whoever changed the BMC has
// more than the reboot-client role. The record and the policy are read
// directly (Powers.Secrets), never from a cache.
func (p *Powers) checkPin(ctx context.Context, bmh *metal3.BareMetalHost) error {
	var rec v1alpha1.RebootRecord
	err := p.Secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: bmh.Name}, &rec)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: host %s: reboot record: %w", bmh.Name, err)
	}
	pin := rec.Spec.BMC
	if rec.Spec.HostUID != string(bmh.UID) || pin == nil || samePin(bmh, pin) || !carriesRequest(bmh) {
		// A pin whose requests are all gone binds nothing: the pass
		// that sees them gone releases the host and drops the pin (a BMC
		// replaced after a withdrawn request does not lock the host out).
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
	return fmt.Errorf("%w: the BMC of host %s (address %q, credentials %q) is not the one it had when its reboot became pending "+
		"(address %q, credentials %q), and a reboot client may have changed it (%v): rebootkit sends it no credentials "+
		"and takes no evidence from it; restore spec.bmc, or install config/admission and ask for the reboot again",
		ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, pin.Address, pin.CredentialsName, perr)
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
