package kube

import (
	"context"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// checkLast is checkPin for a host with no pending reboot and no pin: the
// standing pin, the record's LastBMC (the host's spec.bmc as the
// controller last used it, or first saw it). Without one, spec.bmc is
// recorded as first seen and used. A spec.bmc other than LastBMC is used
// only if the admission policy has been in force since PolicySettle
// before LastBMC was recorded (whoever changed it since has more than the
// reboot-client role); otherwise the record is marked BMCChanged with
// LastBMC, with no call to the new BMC, and the host is not acted on
// until the mark names spec.bmc (an administrator accepted it) or
// spec.bmc is restored. Without it a reboot client could remove a
// request, wait for its reboot to end (its pin goes), redirect spec.bmc,
// and have the next request pin its BMC and take its "Off" as fencing
// evidence.
func (p *Powers) checkLast(ctx context.Context, bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord) error {
	w, canWrite := p.Client.(client.Writer)
	last := rec.Spec.LastBMC
	if last == nil {
		if canWrite {
			// First seen: the BMC later changes are judged against.
			patch := casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"lastBMC": pinOf(bmh, stamp(time.Now()))}})
			if err := w.Patch(ctx, rec, patch); err != nil {
				return mapError("record of", p.Namespace, bmh.Name, err)
			}
		}
		return nil
	}
	if samePin(bmh, last) {
		return nil
	}
	since, err := time.Parse(time.RFC3339Nano, last.PendingSince)
	if err != nil {
		return fmt.Errorf("%w: host %s: its record's last BMC does not parse", ErrBMCChanged, bmh.Name)
	}
	settle := p.PolicySettle
	if settle <= 0 {
		settle = DefaultPolicySettle
	}
	perr := PolicyInForce(ctx, p.Secrets, p.PolicyName, since, settle)
	if perr == nil {
		return nil
	}
	if canWrite {
		if err := w.Patch(ctx, rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"bmcChanged": last}})); err != nil {
			return mapError("record of", p.Namespace, bmh.Name, err)
		}
	}
	return fmt.Errorf("%w: the BMC of host %s (address %q, credentials %q) is not the one rebootkit last used for it (address %q, "+
		"credentials %q), and a reboot client may have changed it (%v): rebootkit sends it no credentials, takes no evidence from it "+
		"and does not act on the host until it is accepted. Check the host's BMC; then restore spec.bmc, or, with more than the "+
		"reboot-client role, accept it by naming it in the record's mark: %s (installing config/admission keeps later changes "+
		"by reboot clients out)", ErrBMCChanged, bmh.Name, bmh.Spec.BMC.Address, bmh.Spec.BMC.CredentialsName, last.Address,
		last.CredentialsName, perr, acceptCommand(p.Namespace, bmh))
}
