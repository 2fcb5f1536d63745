package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// taken from it. Also the error of every pass of a host whose RebootRecord
// is marked BMCChanged (its requests were removed in the write that
// changed its BMC, or its BMC is not the record's LastBMC) until the mark
// names spec.bmc (accepted) or spec.bmc is restored.
var ErrBMCChanged = errors.New("kube: BMC changed during a pending reboot")

// nextPin is the BMC pin the record keeps with status st, and the
// BMCChanged mark it gets (nil: the mark it has, if any, is left as it
// is): the pin it has if it belongs to the same pending reboot, the
// host's spec.bmc if a reboot just became pending (none was pending in
// cur, or another one), nil if none is pending. A reboot that was already
// pending in cur whose pin is missing (dropped, or written by a version
// without pins) is never pinned afresh, which would pin whatever spec.bmc
// a reboot client put in meanwhile: the record is marked instead with a
// mark that names no BMC (ErrBMCChanged until an administrator names the
// BMC to use in it).
func nextPin(bmh *metal3.BareMetalHost, cur *v1alpha1.RebootRecord, st reboot.Status) (pin, mark *v1alpha1.BMCPin) {
	if !pendingIn(st) {
		return nil, nil
	}
	since := st.PendingRebootSince.UTC().Format(time.RFC3339Nano)
	if cur != nil && cur.Spec.HostUID == string(bmh.UID) {
		if cur.Spec.BMC != nil && cur.Spec.BMC.PendingSince == since {
			return cur.Spec.BMC.DeepCopy(), nil
		}
		if was, ok := recordStatus(cur, bmh, true); ok && pendingIn(was) && was.PendingRebootSince.Equal(st.PendingRebootSince) {
			if cur.Spec.BMCChanged != nil {
				return nil, nil // marked already: the mark stays
			}
			return nil, &v1alpha1.BMCPin{PendingSince: since}
		}
	}
	return &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address, CredentialsName: bmh.Spec.BMC.CredentialsName,
		DisableCertificateVerification: bmh.Spec.BMC.DisableCertificateVerification, PendingSince: since}, nil
}

// pinOf is bmh's spec.bmc as a pin stamped since.
func pinOf(bmh *metal3.BareMetalHost, since string) *v1alpha1.BMCPin {
	return &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address, CredentialsName: bmh.Spec.BMC.CredentialsName,
		DisableCertificateVerification: bmh.Spec.BMC.DisableCertificateVerification, PendingSince: since}
}

// nextLast is the LastBMC a record of bmh gets when a pass that checkPin
// let use bmh's spec.bmc writes it: cur's (last) if it names spec.bmc,
// else spec.bmc stamped now.
func nextLast(bmh *metal3.BareMetalHost, last *v1alpha1.BMCPin, now time.Time) *v1alpha1.BMCPin {
	if last != nil && samePin(bmh, last) {
		return last.DeepCopy()
	}
	return pinOf(bmh, stamp(now))
}

// pendingStamp reports whether s is the stamp of a reboot rec (bmh's
// record) has pending: the normal path's (its status) or the reset
// path's (ResetAnnotation).
func pendingStamp(rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost, s string) bool {
	if st, ok := recordStatus(rec, bmh, true); ok && pendingIn(st) && stamp(st.PendingRebootSince) == s {
		return true
	}
	var rs resetRecord
	if raw := rec.Annotations[ResetAnnotation]; raw != "" && json.Unmarshal([]byte(raw), &rs) == nil && rs.pending() {
		return stamp(rs.Since) == s
	}
	return false
}

// pendingIn reports whether st has a pending reboot, as the reboot
// package says: set and not before LastPoweredOn.
func pendingIn(st reboot.Status) bool {
	return !st.PendingRebootSince.IsZero() && !st.PendingRebootSince.Before(st.LastPoweredOn)
}

// acceptCommand is the kubectl command that names bmh's spec.bmc in its
// RebootRecord's BMCChanged mark: the next pass then makes the mark the
// pin of the pending reboot (it keeps the mark's pendingSince).
func acceptCommand(ns string, bmh *metal3.BareMetalHost) string {
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"bmcChanged": map[string]any{"address": bmh.Spec.BMC.Address,
		"credentialsName": bmh.Spec.BMC.CredentialsName, "disableCertificateVerification": bmh.Spec.BMC.DisableCertificateVerification}}})
	return fmt.Sprintf("kubectl -n %s patch rebootrecord %s --type=merge -p '%s'", ns, bmh.Name, raw)
}

// samePin reports whether the host's spec.bmc is the pinned one.
func samePin(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin) bool {
	return bmh.Spec.BMC.Address == pin.Address && bmh.Spec.BMC.CredentialsName == pin.CredentialsName &&
		bmh.Spec.BMC.DisableCertificateVerification == pin.DisableCertificateVerification
}

// checkPin returns nil if the controller may use bmh's spec.bmc, else an
// error wrapping ErrBMCChanged (no call to that BMC was made), or
// ErrInFlight while the pinned BMC's reading runs. The record and the
// policy are read directly (Powers.Secrets), never from a cache.
//
//   - A record marked BMCChanged (see below) refuses every BMC but the one
//     it names; when spec.bmc is that one (restored, or named there by an
//     identity with more than the reboot-client role), the mark becomes
//     the pin again, in one compare-and-swap write.
//   - A pending reboot (the record's status) without a pin is marked with
//     a mark that names no BMC: never pinned afresh.
//   - With no pending reboot and no pin, the record's LastBMC judges it
//     (checkLast): the BMC is used if it is LastBMC (recorded as first
//     seen when there is none) or the admission policy was in force
//     before LastBMC was recorded; otherwise the record is marked.
//   - The pinned BMC is used.
//   - A BMC other than the pinned one is used if the admission policy
//     (and its denying binding) has been in force since DefaultPolicySettle
//     (Powers.PolicySettle) before the pin's reboot became pending, so that
//     whoever changed it has more than the reboot-client role.
//   - Else, while the host carries a request, it is refused.
//   - Else (the requests are gone with the BMC changed, as one write of a
//     reboot client can do): the pinned BMC is read in the background
//     (pinnedReadsOff), its Off counting only by the reboot package's
//     evidence rule (a reading begun StaleReads after the pass that first
//     found the requests gone and after the last power command the record
//     shows: pinnedNotBefore; an earlier Off is ErrInFlight until then); if
//     it reads Off (the pending reboot may have
//     powered the host off), the record is marked with the power-on it
//     owes through that BMC (PowerOnThrough), which this and later passes
//     carry on (drivePinnedOn: with back-off, until a reading begun
//     StaleReads after the call reads On; never while spec.online is
//     false, the host is being deprovisioned or carries a request, nor
//     while a power command the record shows may still land: sentHold,
//     taskHold; no evidence is taken from it: no reboot is pending);
//     either way the
//     pin is dropped and the record marked BMCChanged, with no call to
//     the new BMC, so that the host is neither locked out by the old pin
//     nor handed to the new BMC.
func (p *Powers) checkPin(ctx context.Context, bmh *metal3.BareMetalHost) error {
	reading := false
	defer func() {
		if !reading {
			// Not (or no longer) found with its requests gone and its
			// BMC changed: a later finding waits StaleReads afresh.
			p.mu.Lock()
			p.dropSeen(bmh.Name)
			p.mu.Unlock()
		}
	}()
	// A power-on through a previously pinned BMC that outlived its mark
	// (or its host) and may still land, as this process knows it...
	p.mu.Lock()
	herr := p.resolvedHold(bmh.Name)
	p.mu.Unlock()
	if herr != nil {
		return herr
	}
	var rec v1alpha1.RebootRecord
	err := p.Secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: bmh.Name}, &rec)
	if apierrors.IsNotFound(err) {
		if err := p.earlierHostHold(bmh.Name); err != nil {
			return err
		}
		return p.firstSight(ctx, bmh, nil)
	}
	if err != nil {
		return fmt.Errorf("kube: host %s: reboot record: %w", bmh.Name, err)
	}
	// ... and as the record says (PowerOnSent, written before the On:
	// this process may have restarted since, or another replica sent
	// it), also for a host of the same name created afresh whose record
	// is the earlier host's.
	// A booking past its Until whose task no replica saw end: its task
	// monitor is read (taskHold).
	serr := p.taskHold(bmh, &rec, p.sentHold(&rec, bmh.Name))
	if rec.Spec.HostUID != string(bmh.UID) {
		if err := p.earlierHostHold(bmh.Name); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		return p.firstSight(ctx, bmh, &rec)
	}
	w, canWrite := p.Client.(client.Writer)
	pin := rec.Spec.BMC
	if ch := rec.Spec.BMCChanged; ch != nil {
		if !samePin(bmh, ch) {
			if ch.Address == "" {
				return fmt.Errorf("%w: host %s has a pending reboot whose BMC pin is missing, so rebootkit cannot tell whether its "+
					"BMC (address %q, credentials %q) is the one it had when the reboot became pending: it sends it no credentials and "+
					"takes no evidence from it (the host may be off). Check the host's BMC; then, with more than the reboot-client role, "+
					"name the BMC to use in the record's mark: %s", ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName,
					acceptCommand(p.Namespace, bmh))
			}
			what, owed := "the host may be off", false
			if rec.Spec.PowerOnThrough != nil {
				what, owed = p.drivePinnedOn(ctx, &rec, bmh, serr)
			}
			return pinnedOnErr(fmt.Errorf("%w: the BMC of host %s (address %q, credentials %q) is not the one rebootkit pinned or last used "+
				"for it, %q (credentials %q), and a reboot client may have changed it: rebootkit sends it no credentials and takes no "+
				"evidence from it (%s). Check the host's BMC; then restore spec.bmc, or, with more than the reboot-client "+
				"role, accept it by naming it in the record's mark: %s",
				ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, ch.Address, ch.CredentialsName, what,
				acceptCommand(p.Namespace, bmh)), owed)
		}
		// Restored (or the BMC named by an administrator): the mark
		// becomes the pin of its pending reboot again, if it has one, and
		// the host's last BMC (LastBMC), in one compare-and-swap write,
		// so that the pending reboot is never left without its pin (a
		// later change is judged against it).
		if !canWrite {
			return nil // the pin stays missing; a writing Client moves the mark
		}
		// A power-on owed through the pinned BMC (PowerOnThrough) is
		// dropped: the host's BMC is known again, and the reboot package
		// powers the host as spec.online says.
		spec := map[string]any{"bmcChanged": nil, "lastBMC": ch, "powerOnThrough": nil}
		if pendingStamp(&rec, bmh, ch.PendingSince) {
			spec["bmc"] = ch
		}
		if err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": spec})); err != nil {
			return mapError("record of", p.Namespace, bmh.Name, err)
		}
		// An attempt of that power-on still running (or whose On may
		// still land) is waited for: the reboot package acts on the host
		// only once it is settled (resolvedHold, and sentHold: the write
		// above keeps PowerOnSent).
		if err := p.resolvePinnedOn(bmh.Name); err != nil {
			return err
		}
		return serr
	}
	// Marked and not restored, the host is sent nothing but the owed
	// power-on (above), and that only once no command the record shows
	// may still land (serr); otherwise it is acted on only once a
	// power-on the record shows sent can no longer land.
	if serr != nil {
		return serr
	}
	if pin == nil {
		st, _ := recordStatus(&rec, bmh, true)
		if !pendingIn(st) {
			return p.checkLast(ctx, bmh, &rec)
		}
		// A pending reboot without its pin: never pinned afresh (see
		// nextPin), marked.
		if canWrite {
			mark := &v1alpha1.BMCPin{PendingSince: st.PendingRebootSince.UTC().Format(time.RFC3339Nano)}
			if err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"bmcChanged": mark}})); err != nil {
				return mapError("record of", p.Namespace, bmh.Name, err)
			}
		}
		return fmt.Errorf("%w: host %s has a pending reboot whose BMC pin is missing: rebootkit sends its BMC (address %q, credentials %q) "+
			"no credentials and takes no evidence from it. Check the host's BMC; then, with more than the reboot-client role, name the BMC "+
			"to use in the record's mark: %s", ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, acceptCommand(p.Namespace, bmh))
	}
	if samePin(bmh, pin) {
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
		reading = true
		notBefore := p.pinnedNotBefore(bmh.Name, pin, lastPowerCommand(&rec, bmh, since))
		off, rerr := p.pinnedReadsOff(bmh, pin, notBefore)
		if rerr != nil {
			return rerr // the reading goes on in the background
		}
		// The record is marked (the pin dropped, with no call to the new
		// BMC). If the pinned BMC (the host's when the reboot became
		// pending) reads Off, the withdrawn reboot may have powered the
		// host off: the mark also records the power-on owed through that
		// BMC, the real one (never through the new one, which a reboot
		// client may have put there after holding the host off with a
		// request of its own: issue 39), persisted before any call, and
		// carried on by this and later passes (drivePinnedOn) under the
		// reboot package's rule: only while spec.online is true and the
		// host is not being deprovisioned.
		mark := map[string]any{"bmc": nil, "bmcChanged": pin}
		if off {
			mark["powerOnThrough"] = pin
		}
		if !canWrite {
			return fmt.Errorf("%w: host %s: its BMC changed with its requests removed, and this Client cannot mark its record", ErrBMCChanged, bmh.Name)
		}
		if err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": mark})); err != nil {
			return mapError("record of", p.Namespace, bmh.Name, err)
		}
		what, owed := "the pinned BMC does not read Off", false
		if off {
			rec.Spec.BMC, rec.Spec.BMCChanged, rec.Spec.PowerOnThrough = nil, pin, pin
			what, owed = p.drivePinnedOn(ctx, &rec, bmh, nil) // no hold: returned above
		}
		return pinnedOnErr(fmt.Errorf("%w: the reboot requests of host %s were removed and its BMC changed (address %q, credentials %q; "+
			"pinned %q, credentials %q) while a reboot client may have made the change (%v): %s; the pin is dropped with no call to "+
			"the new BMC, and rebootkit sends the new BMC no credentials and takes no evidence from it until it is accepted: restore "+
			"spec.bmc, or, with more than the reboot-client role, check it and accept it by naming it in the record's mark: %s",
			ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, pin.Address, pin.CredentialsName, perr, what,
			acceptCommand(p.Namespace, bmh)), owed)
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
// ("" is AdmissionPolicyName) and a binding of the same name protect
// hosts as config/admission's do (policyShapeErr: the same validations,
// variables, matchConditions and matchConstraints, failurePolicy Fail, no
// paramKind; the binding with no paramRef, no matchResources narrowing
// it, validationActions exactly Deny) and have both done so since settle
// before t (on r, read directly), else an error wrapping
// ErrNoAdmissionPolicy that says why.
//
// "Since" is dated by creationTimestamp only while both are as created
// (metadata.generation 1): the API server bumps the generation at every
// change of the spec, and nothing on the object says when that was, so a
// policy or binding edited since its creation (say a binding rolled out
// with Warn and switched to Deny) is taken as in force from now only: it
// passes with settle 0 (is it in force now?) and fails for any settle > 0
// (was it in force before t?), so that no BMC change of the past is
// trusted on its word. Deleting and re-applying config/admission dates it
// again.
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
	if err := policyShapeErr(&pol, &b, name); err != nil {
		return fmt.Errorf("%w: %v, so it may not protect the hosts: kubectl delete -k config/admission && kubectl apply -k config/admission",
			ErrNoAdmissionPolicy, err)
	}
	if settle <= 0 {
		return nil
	}
	for _, o := range []metav1.Object{&pol, &b} {
		if o.GetGeneration() != 1 {
			return fmt.Errorf("%w: the %s %s was changed since its creation (generation %d): rebootkit cannot tell since when its "+
				"present spec is in force, so it trusts no BMC change made before now; delete and re-apply config/admission to date it",
				ErrNoAdmissionPolicy, kindOf(o), name, o.GetGeneration())
		}
		if o.GetCreationTimestamp().Add(settle).After(t) {
			return fmt.Errorf("%w: policy %s was installed after %s", ErrNoAdmissionPolicy, name, t.Add(-settle).UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// kindOf names o's kind for PolicyInForce's messages.
func kindOf(o metav1.Object) string {
	if _, ok := o.(*admissionv1.ValidatingAdmissionPolicyBinding); ok {
		return "binding"
	}
	return "policy"
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
