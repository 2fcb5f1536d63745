package kube

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// brokenHold is the reset path's record of a hold someone broke: a host
// whose RebootRecord carries fencing evidence of the normal path (a hold
// off written before spec.disablePowerOff was set) and that reads On has
// run since that evidence, so Status.HoldBroken is set (once per
// evidence) and the remediation's view of the host (Fenced and not
// broken) turns false. A reading that echoes a state from before the
// power-off makes it report a broken hold that was not: the safe side.
func brokenHold(st reboot.Status, p power.State, now time.Time) (reboot.Status, bool) {
	if p != power.StateOn || st.LastPoweredOff.IsZero() || st.HoldBroken.After(st.LastPoweredOff) {
		return st, false
	}
	st.HoldBroken = now
	return st, true
}

// holdIntact reports whether st carries fencing evidence no broken hold
// followed: the reset path then polls the host's power at PollInterval.
func holdIntact(st reboot.Status) bool {
	return !st.LastPoweredOff.IsZero() && !st.HoldBroken.After(st.LastPoweredOff)
}

// breakHold writes Status.HoldBroken into rec, whose Status is st, (a compare-and-swap on the
// record read) when brokenHold says so; done reports that it wrote (or
// failed), and the pass ends with res, err.
func (c *RebootController) breakHold(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord,
	st reboot.Status, p power.State, now time.Time) (res ctrl.Result, done bool, err error) {
	nst, ok := brokenHold(st, p, now)
	if !ok {
		return ctrl.Result{}, false, nil
	}
	raw, err := json.Marshal(nst)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	err = reboot.Fenced(ctx, c.Reconciler.Guard, "kube: hold of host "+bmh.Name, func(ctx context.Context) error {
		if perr := hosts.Client.Patch(ctx, rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"status": string(raw)}})); perr != nil {
			return mapError("record of", hosts.Namespace, bmh.Name, perr)
		}
		return nil
	})
	if errors.Is(err, reboot.ErrConflict) || err == nil {
		if err == nil && c.Recorder != nil {
			c.eventf(bmh, nil, "Warning", "HoldBroken", "Reboot",
				"host %s, held off with fencing evidence (%s) before spec.disablePowerOff was set, reads on: someone powered it on; "+
					"its hold is recorded broken (it fences nothing now) and, with spec.disablePowerOff, it is not powered off again",
				bmh.Name, st.LastPoweredOff.UTC().Format(time.RFC3339))
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, true, nil
	}
	return ctrl.Result{}, true, err
}

// recordStatus is the reboot Status (the normal path's, with its fencing
// evidence) of rec, the RebootRecord of bmh: ok if it exists, is this
// host's and parses.
func recordStatus(rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost, exists bool) (st reboot.Status, ok bool) {
	if !exists || rec.Spec.HostUID != string(bmh.UID) || rec.Spec.Status == "" {
		return st, false
	}
	return st, json.Unmarshal([]byte(rec.Spec.Status), &st) == nil
}
