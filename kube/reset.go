package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ResetAnnotation on a host's RebootRecord keeps the state of the reboot
// by reset of a host with spec.disablePowerOff (JSON: when the request was
// first seen and the value it had, when the last reset or power-on was
// about to be sent, when the BMC accepted it, how many resets were sent,
// when the controller gave up, when the request was found done; with no
// request, when the last power-on was about to be sent). Only the
// controller writes it.
const ResetAnnotation = "rebootkit.io/reset"

// LastResetAnnotation on a host's RebootRecord is when the BMC accepted
// the reset that answered the host's last reboot request (RFC 3339), set
// when the request is removed.
const LastResetAnnotation = "rebootkit.io/last-reset"

// ResetRequestAnnotation on a host with spec.disablePowerOff ties the bare
// reboot request the controller is answering to the RebootRecord's
// ResetAnnotation: its value is that state's Since (RFC 3339 with
// nanoseconds). The controller writes it after the record when it takes a
// request, in the server-side apply that sets its token on the request
// (see doc.go), and removes it with the request: a record whose Since the
// host does not carry is an earlier request's and never answers this one,
// nor does one whose request lost the token (removed and made again, or
// changed, while no pass saw it).
const ResetRequestAnnotation = "rebootkit.io/reset-request"

// reconcileReset is a pass of a host with spec.disablePowerOff: its power
// never goes off, so its bare reboot request is done with a reset
// (decideReset), its keyed requests (a hold off) and spec.online false are
// refused with a PowerOffRefused event, with no request its power follows
// spec.online true, and no fencing evidence is ever written for it.
func (c *RebootController) reconcileReset(ctx context.Context, bmh *metal3.BareMetalHost) (ctrl.Result, error) {
	name := bmh.Name
	idle := cmp.Or(c.IdlePoll, time.Minute)
	var keyed []string
	for k := range bmh.Annotations {
		if strings.HasPrefix(k, reboot.AnnotationPrefix) {
			keyed = append(keyed, k)
		}
	}
	refusal := map[string]string{}
	for _, k := range keyed {
		refusal[k] = bmh.Annotations[k]
	}
	if !bmh.Spec.Online {
		refusal["spec.online"] = "false"
	}
	if c.refuseResetOnce(name, refusal) && c.Recorder != nil {
		c.eventf(bmh, nil, "Warning", "PowerOffRefused", "Reboot",
			"%v: host %s is never powered off by rebootkit, so it cannot be held off (%s): a reboot of it is a reset, "+
				"asked for with the bare %s annotation; remove the others, or clear spec.disablePowerOff",
			ErrPowerOffDisabled, name, strings.Join(sortedKeys(refusal), ", "), reboot.Annotation)
	}
	if Deprovisioned(bmh) {
		return ctrl.Result{}, nil // its power is provisioning's
	}
	hosts, ok := c.Reconciler.Hosts.(*RebootHosts)
	if !ok {
		return ctrl.Result{}, errors.New("kube: a host with spec.disablePowerOff needs the Reconciler's Hosts to be a *RebootHosts")
	}
	var rec v1alpha1.RebootRecord
	err := hosts.Client.Get(ctx, types.NamespacedName{Namespace: hosts.Namespace, Name: name}, &rec)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("kube: reboot record %s/%s: %w", hosts.Namespace, name, err)
	}
	// The normal path's pending reboot that no one asks for any more is
	// ended, and its pin dropped, before anything else (answeredNormal).
	if wrote, err := c.endNormal(ctx, hosts, bmh, &rec, exists); wrote {
		if errors.Is(err, reboot.ErrConflict) {
			return ctrl.Result{RequeueAfter: c.conflictDelay(name, bmh)}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if wait, ok := c.withdrawnWait(bmh, &rec, exists); ok {
		// The reset state (its Sending among it) stays until then.
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var st resetRecord
	if exists && rec.Spec.HostUID == string(bmh.UID) && rec.Annotations[ResetAnnotation] != "" {
		if json.Unmarshal([]byte(rec.Annotations[ResetAnnotation]), &st) != nil {
			st = resetRecord{} // corrupt: start afresh (no evidence is kept here)
		}
	}
	value := bmh.Annotations[reboot.Annotation]
	_, requested := bmh.Annotations[reboot.Annotation]
	token, others := requestOwners(bmh)
	// A request that only the controller's token owns was withdrawn by
	// its owner's server-side apply (which leaves a field another manager
	// owns): no request.
	withdrawn := requested && token && !others
	requested = requested && !withdrawn
	marker, marked := bmh.Annotations[ResetRequestAnnotation]
	var req *resetRequest
	if requested {
		req = &resetRequest{Value: value}
	}
	if requested && st.pending() && (!token || marker != stamp(st.Since) || st.Request == nil || *st.Request != *req) {
		// An earlier request's state (one removed and made again, or
		// changed, while no pass saw it: the token went with it), or a
		// take whose second write did not happen: this request starts
		// afresh.
		st = resetRecord{}
	}
	now := c.Reconciler.Now()
	cfg := resetConfigOf(c.Reconciler.Config)
	var d resetDecision
	var o resetObserved
	var pc power.Controller
	used := false // this pass's checkPin let use spec.bmc
	if !requested && (st.pending() || withdrawn) {
		// decideReset clears whatever the power reads, with no BMC call.
		// A withdrawn request goes with it. With spec.bmc no longer the
		// pinned one, the pass first goes through checkPin (its rule for
		// a withdrawn request: the pinned BMC is read, an Off lets the new
		// BMC power the host back on, anything else marks the record),
		// so that a reboot client that removes its request and redirects
		// spec.bmc in one write gets no credentials sent to its BMC.
		if exists && rec.Spec.HostUID == string(bmh.UID) && rec.Spec.BMC != nil && !samePin(bmh, rec.Spec.BMC) {
			if _, err := c.Reconciler.Power(name); err != nil {
				return ctrl.Result{}, err
			}
			used = true
		}
		d = resetDecision{Clear: true}
	} else {
		o = resetObserved{Requested: requested, Request: req, Online: bmh.Spec.Online, Held: len(keyed) > 0, Rec: st, Power: power.StateUnknown}
		pc, err = c.Reconciler.Power(name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if s, err := pc.State(ctx); err == nil {
			o.Power = s
		} else if !isInFlight(err) && c.Recorder != nil {
			c.eventf(bmh, nil, "Warning", "RebootPowerError", "Reboot",
				"host %s: power state read failed: %v; nothing is sent to it until a reading comes: %s", name, err, powerFix(err))
		}
		if hs, ok := recordStatus(&rec, bmh, exists); ok {
			if res, done, err := c.breakHold(ctx, hosts, bmh, &rec, hs, o.Power, now); done {
				return res, err
			}
		}
		if c.Async != nil {
			if lo, ok := c.Async.lateReset(name); ok {
				c.noteReset(name, lo)
			}
			o.InFlight = c.Async.InFlight(name)
		}
		if lo, ok := c.lastReset(name); ok && requested {
			o.Outcome = &lo
		}
		d = decideReset(o, cfg, now)
	}
	write := func(f func(context.Context) error) error {
		return reboot.Fenced(ctx, c.Reconciler.Guard, "kube: reset of host "+name, f)
	}
	unmark := map[string]any{}
	if marked {
		unmark[ResetRequestAnnotation] = nil
	}
	switch {
	case d.Done:
		// The state first, kept and marked done (with LastResetAnnotation),
		// then the request and its marker in one write: a stop in between
		// leaves a request whose state says it is done (the next pass
		// removes it, no reset again), and the pass that sees no request
		// clears the state.
		unmark[reboot.Annotation] = nil
		fin := st
		if fin.Done.IsZero() {
			fin.Done, fin.LeftOff = now, d.LeftOff
		}
		err = write(func(ctx context.Context) error {
			if err := c.writeReset(ctx, hosts, bmh, &rec, exists, &fin, fin.Accepted, true); err != nil {
				return err
			}
			return patchHost(ctx, hosts, bmh, unmark)
		})
		if err == nil && c.Recorder != nil {
			c.eventf(bmh, nil, "Normal", "Reset", "Reboot",
				"host %s %s (spec.disablePowerOff: a reboot is a reset, never a power-off); %s removed",
				name, doneWhat(fin, fin.LeftOff), reboot.Annotation)
		}
		c.forgetReset(name)
	case d.Clear:
		if withdrawn {
			// Only the token keeps it: its owner withdrew it.
			unmark[reboot.Annotation] = nil
		}
		err = write(func(ctx context.Context) error {
			if err := c.writeReset(ctx, hosts, bmh, &rec, exists, nil, time.Time{}, used); err != nil || len(unmark) == 0 {
				return err
			}
			return patchHost(ctx, hosts, bmh, unmark)
		})
		c.forgetReset(name)
	case d.Write:
		err = write(func(ctx context.Context) error {
			if err := c.writeReset(ctx, hosts, bmh, &rec, exists, &d.Rec, time.Time{}, true); err != nil || !d.Rec.pending() || token && marker == stamp(d.Rec.Since) {
				return err
			}
			return takeRequest(ctx, hosts, bmh, stamp(d.Rec.Since))
		})
	}
	if errors.Is(err, reboot.ErrConflict) {
		// Someone wrote in between (or owns what the take writes): decide
		// again, backing off while it lasts, with an event if it does.
		return ctrl.Result{RequeueAfter: c.conflictDelay(name, bmh)}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	c.conflictsEnd(name)
	if d.GaveUp && c.Recorder != nil {
		c.eventf(bmh, nil, "Warning", "ResetOutcomeUnknown", "Reboot",
			"host %s was sent %d resets for its request whose outcome is not known (%s): it may have been reset "+
				"(on NC-SI hardware the reset takes the BMC's port down with the host's NIC); no more resets are sent. Check the host, then remove %s "+
				"(a new request starts afresh); an Off reading or the BMC's late answer is still taken", name, d.Rec.Resets, unknownWhy(o.Outcome, d.Rec), reboot.Annotation)
	}
	if d.Unsupported && c.Recorder != nil {
		c.eventf(bmh, nil, "Warning", "ResetUnsupported", "Reboot",
			"host %s has spec.disablePowerOff and its BMC cannot reset it (%v): it is neither powered off nor reset; "+
				"reboot it by hand and remove %s, or enable ForceRestart (Redfish) / hard reset (IPMI) on its BMC", name, o.Outcome.err, reboot.Annotation)
	}
	if d.Call != "" {
		cerr := reboot.Fenced(ctx, c.Reconciler.Guard, "kube: "+d.Call+" of host "+name,
			func(ctx context.Context) error { return c.sendReset(ctx, pc, d.Call) })
		if errors.Is(cerr, reboot.ErrNotLeader) {
			// Not sent: a refusal (resetRefused), which does not count.
			// The next pass here records it if this process leads again;
			// another leader has no outcome for it and takes it for one
			// of unknown outcome (at most one more reset).
			c.noteReset(name, resetOutcome{at: c.Reconciler.Now(), err: cerr})
			return ctrl.Result{RequeueAfter: time.Millisecond}, nil
		}
		if !isInFlight(cerr) {
			c.noteReset(name, resetOutcome{at: c.Reconciler.Now(), err: cerr})
		}
		if cerr != nil && !isInFlight(cerr) && c.Recorder != nil {
			c.eventf(bmh, nil, "Warning", "RebootPowerError", "Reboot", "host %s: %s", name, callFailure(d.Call, cerr, d.Rec.Resets, cfg))
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if d.Write || d.Done || d.Clear {
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	after := d.After
	if after <= 0 || after > idle {
		after = idle
	}
	if hs, ok := recordStatus(&rec, bmh, exists); ok && holdIntact(hs) {
		after = min(after, cfg.PollInterval) // someone may break the hold: see brokenHold
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// dropReset clears the reset state of a host that the normal path now
// handles (spec.disablePowerOff cleared): the record's ResetAnnotation,
// then the host's ResetRequestAnnotation, so that no later request of the
// reset path is answered by it, then the controller's token (a request
// only the token keeps, withdrawn by its owner's server-side apply, goes
// with it).
func (c *RebootController) dropReset(ctx context.Context, bmh *metal3.BareMetalHost) error {
	hosts, ok := c.Reconciler.Hosts.(*RebootHosts)
	if !ok {
		return errors.New("kube: a host with spec.disablePowerOff needs the Reconciler's Hosts to be a *RebootHosts")
	}
	var rec v1alpha1.RebootRecord
	err := hosts.Client.Get(ctx, types.NamespacedName{Namespace: hosts.Namespace, Name: bmh.Name}, &rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: reboot record %s/%s: %w", hosts.Namespace, bmh.Name, err)
	}
	c.forgetReset(bmh.Name)
	return reboot.Fenced(ctx, c.Reconciler.Guard, "kube: reset state of host "+bmh.Name, func(ctx context.Context) error {
		if err == nil && rec.Annotations[ResetAnnotation] != "" {
			ann := map[string]any{ResetAnnotation: nil}
			if perr := hosts.Client.Patch(ctx, &rec, casPatch(rec.ResourceVersion, metadataPatch(nil, ann))); perr != nil {
				return mapError("record of", hosts.Namespace, bmh.Name, perr)
			}
		}
		if err := patchHost(ctx, hosts, bmh, map[string]any{ResetRequestAnnotation: nil}); err != nil {
			return err
		}
		return releaseRequest(ctx, hosts, bmh)
	})
}

// patchHost writes the annotations ann (nil: removed) of bmh with a
// compare-and-swap on the version read, as the field manager
// resetFieldOwner: the marker's writes then bump no managedFields entry
// of the process's other writers, such as a remediation that wrote the
// request (see resetRequest).
func patchHost(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, ann map[string]any) error {
	if err := hosts.Client.Patch(ctx, bmh, casPatch(bmh.ResourceVersion, metadataPatch(nil, ann)), client.FieldOwner(resetFieldOwner)); err != nil {
		return mapError("reset of", hosts.Namespace, bmh.Name, err)
	}
	return nil
}

// callFailure says what failed for a call of the reset path, and what
// follows: a refused reset is sent again, a reset of unknown outcome at
// most once more (resets: how many count, this one included).
func callFailure(call string, err error, resets int, cfg resetConfig) string {
	switch {
	case call != "reset":
		return fmt.Sprintf("%s failed: %v; %s", call, err, powerFix(err))
	case resetRefused(err):
		return fmt.Sprintf("the BMC refused the reset (%v): it was not carried out and does not count; it is sent again %s after "+
			"the refusal, on an On reading; %s", err, cfg.RetryDelay, powerFix(err))
	case resets < maxResets:
		return fmt.Sprintf("the outcome of the reset is not known (%v): it may have been carried out; it is sent once more, "+
			"not before %s, on an On reading then (a late answer or an Off reading is still taken); %s",
			err, max(cfg.StaleReads, cfg.RetryDelay), powerFix(err))
	}
	return fmt.Sprintf("the outcome of the reset is not known (%v): it may have been carried out; it was the last one sent for this "+
		"request; %s", err, powerFix(err))
}

// unknownWhy says why the outcome of the last reset of rec is not known:
// the error this process saw for it (out), or a restart (or a call given
// up) before its answer came.
func unknownWhy(out *resetOutcome, rec resetRecord) string {
	if out != nil && out.err != nil && !out.at.Before(rec.Sending) {
		return fmt.Sprintf("the BMC's answer to the last one did not come: %v", out.err)
	}
	return "the controller restarted, or gave up on the call, before the BMC's answer to the last one came"
}

// resetFieldOwner is the field manager of the reset path's writes to a
// host (ResetRequestAnnotation, the removal of a request it answered).
const resetFieldOwner = "rebootkit-reset"

// stamp is t as ResetRequestAnnotation and the BMC pin write it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// doneWhat says what answered a request of the reset path.
func doneWhat(st resetRecord, leftOff bool) string {
	switch {
	case leftOff:
		return "read off after the request and is left off (spec.online is false, or a keyed request holds it)"
	case st.Op == "on" && st.accepted():
		return "read off after the request, was powered on at " + st.Accepted.UTC().Format(time.RFC3339) + " and reads on"
	case st.Op == "on":
		return "read off after the request, was powered on (the BMC's answer was lost) and reads on"
	}
	return "was reset at " + st.Accepted.UTC().Format(time.RFC3339) + " and reads on"
}

// sendReset sends the reset path's command through pc.
func (c *RebootController) sendReset(ctx context.Context, pc power.Controller, call string) error {
	if call == "on" {
		return pc.On(ctx)
	}
	return resetOf(ctx, pc)
}

// writeReset writes the record's reset state st (nil: cleared; with last
// set, the LastResetAnnotation) with a compare-and-swap on the record
// read, and the BMC pin of the pending request (see Powers): created if
// missing, replaced if it is an earlier host's. The pin of a reboot the
// normal path has pending (the record's status) is kept as it is, even
// once the reset is done, until the host carries no request (then
// endNormal, at the start of the next pass, ends that reboot and drops
// its pin). With used (this pass's power controller came from checkPin,
// so spec.bmc is one it let use) the record's LastBMC becomes spec.bmc;
// otherwise it is kept.
func (c *RebootController) writeReset(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord,
	exists bool, st *resetRecord, last time.Time, used bool) error {
	ann := map[string]any{ResetAnnotation: nil}
	var pin *v1alpha1.BMCPin
	if st != nil && !st.pending() {
		// A power-on with no request (power follows spec.online): no pin.
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		ann[ResetAnnotation] = string(raw)
	} else if st != nil {
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		ann[ResetAnnotation] = string(raw)
		since := stamp(st.Since)
		if exists && rec.Spec.HostUID == string(bmh.UID) && rec.Spec.BMC != nil && rec.Spec.BMC.PendingSince == since {
			pin = rec.Spec.BMC.DeepCopy()
		} else {
			pin = &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address, CredentialsName: bmh.Spec.BMC.CredentialsName,
				DisableCertificateVerification: bmh.Spec.BMC.DisableCertificateVerification, PendingSince: since}
		}
	}
	var status any // the normal path's status, if this write ends its reboot
	if np := normalPin(bmh, rec, exists); np != nil && used && !samePin(bmh, np) && !carriesRequest(bmh) {
		// The normal path's reboot is pending with no request left, and
		// checkPin let this pass use the changed spec.bmc (its rule for
		// withdrawn requests: the pinned BMC read Off; or the policy):
		// that reboot ends here, and its pin goes, as the normal path's
		// pass that powers the host on through its new BMC ends it, so
		// that the next reading of the old BMC (On, once the host is
		// powered on) does not mark the record.
		raw, err := json.Marshal(endedNormal(bmh, rec))
		if err != nil {
			return err
		}
		status = string(raw)
	} else if np != nil {
		// The normal path's reboot is still pending (the host went to the
		// reset path meanwhile): its pin stays, and guards the reset as
		// well (it was taken earlier, so a BMC change since the reset's
		// request is one since it too).
		pin = np
	}
	if !last.IsZero() {
		ann[LastResetAnnotation] = last.UTC().Format(time.RFC3339)
	}
	var lastBMC *v1alpha1.BMCPin
	if exists && rec.Spec.HostUID == string(bmh.UID) {
		lastBMC = rec.Spec.LastBMC
	}
	if used {
		lastBMC = nextLast(bmh, lastBMC, c.Reconciler.Now())
	}
	owner := []metav1.OwnerReference{{APIVersion: metal3.GroupVersion.String(), Kind: "BareMetalHost",
		Name: bmh.Name, UID: bmh.UID, BlockOwnerDeletion: ptr.To(false)}}
	if !exists {
		if st == nil {
			return nil
		}
		nr := v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: hosts.Namespace, Name: bmh.Name,
			Annotations: map[string]string{ResetAnnotation: ann[ResetAnnotation].(string)}, OwnerReferences: owner},
			Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin, LastBMC: lastBMC}}
		err := hosts.Client.Create(ctx, &nr)
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kube: reboot record %s/%s: %w", hosts.Namespace, bmh.Name, reboot.ErrConflict)
		}
		return err
	}
	spec := map[string]any{"bmc": pin, "lastBMC": lastBMC}
	if status != nil {
		spec["status"] = status
	}
	if rec.Spec.HostUID != string(bmh.UID) {
		// An earlier host's record: start afresh.
		spec["hostUID"], spec["status"] = string(bmh.UID), ""
	}
	err := hosts.Client.Patch(ctx, rec, casPatch(rec.ResourceVersion, map[string]any{"spec": spec,
		"metadata": map[string]any{"annotations": ann, "ownerReferences": owner}}))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: reboot record %s/%s: %w", hosts.Namespace, bmh.Name, reboot.ErrConflict)
	}
	if err != nil {
		return mapError("record of", hosts.Namespace, bmh.Name, err)
	}
	return nil
}

// normalPin is the record's BMC pin if it is the pin of the reboot its
// status (the normal path's) has pending, else nil.
func normalPin(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord, exists bool) *v1alpha1.BMCPin {
	if !exists || rec.Spec.HostUID != string(bmh.UID) || rec.Spec.BMC == nil {
		return nil
	}
	st, ok := recordStatus(rec, bmh, true)
	if !ok || !pendingIn(st) || rec.Spec.BMC.PendingSince != stamp(st.PendingRebootSince) {
		return nil
	}
	return rec.Spec.BMC.DeepCopy()
}

// noteReset, lastReset and forgetReset keep the outcome of the reset
// path's last command per host, in memory.
func (c *RebootController) noteReset(host string, o resetOutcome) {
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	if c.resetOut == nil {
		c.resetOut = map[string]resetOutcome{}
	}
	c.resetOut[host] = o
}

func (c *RebootController) lastReset(host string) (resetOutcome, bool) {
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	o, ok := c.resetOut[host]
	return o, ok
}

func (c *RebootController) forgetReset(host string) {
	c.refusedMu.Lock()
	delete(c.resetOut, host)
	c.refusedMu.Unlock()
	if c.Async != nil {
		c.Async.lateReset(host) // dropped: it answered a command of this request
	}
}

// refuseResetOnce reports whether the refusal of what a host with
// spec.disablePowerOff asks for (keyed requests, spec.online false) is
// news (and notes it); an empty set forgets.
func (c *RebootController) refuseResetOnce(host string, what map[string]string) bool {
	keys := sortedKeys(what)
	for i, k := range keys {
		keys[i] = k + "=" + what[k]
	}
	sig := strings.Join(keys, "\x00")
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	if c.resetRefused == nil {
		c.resetRefused = map[string]string{}
	}
	if sig == "" {
		delete(c.resetRefused, host)
		return false
	}
	if c.resetRefused[host] == sig {
		return false
	}
	c.resetRefused[host] = sig
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
