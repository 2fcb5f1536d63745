package kube

import (
	"context"
	"encoding/json"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// answeredNormal is the normal path's Status of rec (bmh's RebootRecord)
// with its pending reboot ended, and ok, when the reset path ends it: the
// record pins that reboot (normalPin), bmh carries no request any more
// (the reset path answered it, or its clients withdrew it: no one asks
// for that reboot now, and the normal path, which would end it, never
// runs on a host with spec.disablePowerOff), and bmh's spec.bmc is still
// the pinned one, so that dropping the pin hands the host to no BMC a
// reboot client put in during the reboot (a BMC changed meanwhile keeps
// the pin: checkPin judges it). The pending reboot and its requests go
// as the reboot package clears them; the fencing evidence
// (LastPoweredOff, HoldBroken) and the power-on, Online=false and press
// records stay as they are. A pure function of what was read.
func answeredNormal(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord, exists bool) (reboot.Status, bool) {
	np := normalPin(bmh, rec, exists)
	if np == nil || carriesRequest(bmh) || !samePin(bmh, np) {
		return reboot.Status{}, false
	}
	return endedNormal(bmh, rec), true
}

// endedNormal is the normal path's Status of rec (bmh's RebootRecord,
// whose status parses) with its pending reboot ended as the reboot
// package ends one: its pending reboot and requests cleared, the fencing
// evidence (LastPoweredOff, HoldBroken) and the power-on, Online=false
// and press records kept.
func endedNormal(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord) reboot.Status {
	st, _ := recordStatus(rec, bmh, true)
	st.PendingRebootSince, st.Mode = time.Time{}, power.ModeSoft
	st.Seen, st.LastRequestSeen = nil, time.Time{}
	st.RewriteSeen, st.LastRewriteSeen = time.Time{}, time.Time{}
	return st
}

// endNormal writes what answeredNormal says into rec, when it says so:
// the ended Status and no BMC pin, in one compare-and-swap write on the
// record read (fenced by the controller's Guard), so that a host is never
// locked out by the pin of a reboot no longer asked for. wrote reports
// that it wrote (or failed with err).
func (c *RebootController) endNormal(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord,
	exists bool) (wrote bool, err error) {
	st, ok := answeredNormal(bmh, rec, exists)
	if !ok {
		return false, nil
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return true, err
	}
	return true, reboot.Fenced(ctx, c.Reconciler.Guard, "kube: answered reboot of host "+bmh.Name, func(ctx context.Context) error {
		// spec.bmc is the pinned BMC (answeredNormal): the host's last BMC.
		spec := map[string]any{"status": string(raw), "bmc": nil, "lastBMC": nextLast(bmh, rec.Spec.LastBMC, c.Reconciler.Now())}
		patch := casPatch(rec.ResourceVersion, map[string]any{"spec": spec})
		if perr := hosts.Client.Patch(ctx, rec, patch); perr != nil {
			return mapError("record of", hosts.Namespace, bmh.Name, perr)
		}
		return nil
	})
}
