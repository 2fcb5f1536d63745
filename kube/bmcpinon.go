package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// pinnedOnFirstRetry and pinnedOnMaxRetry bound the back-off between two
// attempts of a power-on through a pinned BMC (RebootRecord's
// PowerOnThrough): the first retry after pinnedOnFirstRetry, each next
// one twice as late, at most pinnedOnMaxRetry.
const (
	pinnedOnFirstRetry = time.Second
	pinnedOnMaxRetry   = time.Minute
)

// pinnedOn is one attempt of a power-on through a host's pinned BMC, run
// in a goroutine of its own (Powers.pinOn, at most one per host): the On
// call, then, StaleReads after it returned, a State call whose On is the
// only success (an earlier reading may echo the host off from before).
type pinnedOn struct {
	pin   v1alpha1.BMCPin
	done  chan struct{} // closed when the attempt ended
	on    bool          // read On StaleReads after the call (set before done is closed)
	err   error         // why it failed (set before done is closed)
	end   time.Time     // set before done is closed
	fails int           // failed attempts before this one, for the back-off
	// sent: the record says the On is being sent (markSent wrote its
	// PowerOnSent, just before the command), so it may land until end
	// (set under p.mu before the command; final before done is closed).
	sent bool
	// sentAt: the At of the PowerOnSent markSent wrote (set with sent).
	sentAt string
	// until: the Until of that PowerOnSent (the call's deadline plus
	// TaskLimit: markSent) (set with sent).
	until time.Time
	// queued: the BMC accepted the On for later (power.Queued: a Redfish
	// 202, a task), so it may land until its task ended (taskEnded), or
	// until until (moved to the end of the wait for the task: markTask)
	// (final before done is closed).
	queued bool
	// taskEnded: the task of a queued On was read ended, or the host
	// read On, before TaskLimit (p.mu held).
	taskEnded bool
	// resolved: the mark was resolved (spec.bmc restored or the BMC
	// accepted) while o was kept: the reboot package may act on the host
	// only once o ended and, if its On may have been sent, StaleReads
	// after its end (resolvedHold) (p.mu held).
	resolved bool
}

// settledAt is when a reading of the host no longer echoes it from
// before o's On, nor precedes its landing: StaleReads (stale) after o's
// end, or after until if the BMC queued the On, its task was not seen
// to end, and until is later (o ended).
func (o *pinnedOn) settledAt(stale time.Duration) time.Time {
	at := o.end
	if o.queued && !o.taskEnded && o.until.After(at) {
		at = o.until
	}
	return at.Add(stale)
}

// retryAt is when the attempt after o (failed) may start.
func (o *pinnedOn) retryAt() time.Time {
	d := pinnedOnFirstRetry
	for i := 0; i < o.fails && d < pinnedOnMaxRetry; i++ {
		d *= 2
	}
	return o.end.Add(min(d, pinnedOnMaxRetry))
}

// onEligible is the reboot package's rule for powering a host on, as far
// as checkPin's owed power-on goes: "" if bmh may be powered on, else why
// not (spec.online false: "off; held while Online is false"; being
// deprovisioned; a reboot request, whose reboot is not through the
// pinned BMC).
func onEligible(bmh *metal3.BareMetalHost) string {
	switch {
	case !bmh.Spec.Online:
		return "spec.online is false, so it is left off"
	case Deprovisioned(bmh):
		return "it is being deprovisioned, so it is left off"
	case carriesRequest(bmh):
		return "it carries a reboot request, so it is not powered on"
	}
	return ""
}

// drivePinnedOn carries on the power-on rec (bmh's record, marked
// BMCChanged) owes through its PowerOnThrough BMC: nothing while
// onEligible refuses; otherwise an attempt is started if none runs, the
// last one's back-off is over and the record's hold (hold: sentHold's,
// through taskHold) is over, and once an attempt read On the intent is
// removed from the record (compare-and-swap). It returns what happened,
// in the operator's words, and whether the power-on is still owed and
// may go on (the host is then requeued soon).
func (p *Powers) drivePinnedOn(ctx context.Context, rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost, hold error) (string, bool) {
	pin := rec.Spec.PowerOnThrough
	if why := onEligible(bmh); why != "" {
		return fmt.Sprintf("its pinned BMC %q read Off, and %s (it is powered on through that BMC once this no longer holds, "+
			"unless the new BMC is accepted first)", pin.Address, why), false
	}
	on, what := p.pinnedPowerOn(bmh, rec, hold)
	if !on {
		return what, true
	}
	w, ok := p.Client.(client.Writer)
	if !ok {
		return what, false
	}
	patch := casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnThrough": nil}})
	if err := w.Patch(ctx, rec, patch); err != nil {
		return fmt.Sprintf("%s, but the record could not be updated (%v): the next pass reads the pinned BMC again", what,
			mapError("record of", p.Namespace, bmh.Name, err)), true
	}
	return what, false
}

// pinnedPowerOn reports whether an attempt of powering bmh on through the
// BMC its record rec owes it through (PowerOnThrough) read On, and
// otherwise what is under way; it starts an attempt when none runs, the
// back-off of the last failed one is over and hold (the record's hold of
// the host: a power command its booking shows may still land) is nil:
// one rule with writeBooking's, which refuses to write over such a
// booking (TestReview39ab_PinnedOnReplacesLiveBookingHostHandedOverWhileTaskRuns).
// An attempt whose task is overdue (ErrTaskOverdue) is retried once the
// record no longer shows its booking unended: stamped Returned (its task
// read ended, by any replica: taskHold) or removed
// (TestReview39ab_PinnedOnOverdueNeverRetriedAfterTaskReadEnded). It
// never waits on the BMC.
func (p *Powers) pinnedPowerOn(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord, hold error) (bool, string) {
	pin := rec.Spec.PowerOnThrough
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinOn == nil {
		p.pinOn = map[string]*pinnedOn{}
	}
	o := p.pinOn[bmh.Name]
	if o != nil && o.pin != *pin {
		if !o.finishedOn() {
			return false, fmt.Sprintf("a power-on through its previously pinned BMC is still running; the power-on through %q waits", pin.Address)
		}
		o = nil
	}
	fails := 0
	if o != nil {
		if !o.finishedOn() {
			return false, fmt.Sprintf("its pinned BMC %q read Off: it is being powered back on through that BMC (the call is running)", pin.Address)
		}
		if o.on {
			delete(p.pinOn, bmh.Name)
			return true, fmt.Sprintf("it was powered back on through its pinned BMC %q (read On after the call)", pin.Address)
		}
		if errors.Is(o.err, ErrTaskOverdue) && bookingUnended(rec, o.sentAt) {
			// Its task may still land: no other On is sent meanwhile
			// (the record's PowerOnSent keeps the task).
			return false, fmt.Sprintf("%v: it is left as it is until that task is read ended (rebootkit reads its monitor); "+
				"once it ended or was cancelled on the BMC, you may remove the record's wait: kubectl -n %s patch rebootrecord %s "+
				"--type=merge -p '{\"spec\":{\"powerOnSent\":null}}'", o.err, p.Namespace, bmh.Name)
		}
		if at := o.retryAt(); time.Now().Before(at) {
			return false, fmt.Sprintf("its pinned BMC %q read Off; powering it back on through that BMC failed (%v), %d time(s): "+
				"retried at %s", pin.Address, o.err, o.fails+1, at.UTC().Format(time.RFC3339))
		}
		fails = o.fails + 1
	}
	if hold != nil {
		return false, fmt.Sprintf("its pinned BMC %q read Off; it is powered back on through that BMC once no power command its "+
			"record shows may still land (%v)", pin.Address, hold)
	}
	if p.readCtx == nil {
		p.readCtx, p.readStop = context.WithCancel(context.Background())
	}
	o = &pinnedOn{pin: *pin, done: make(chan struct{}), fails: fails}
	p.pinOn[bmh.Name] = o
	go p.runPinnedOn(p.readCtx, bmh.DeepCopy(), o)
	return false, fmt.Sprintf("its pinned BMC %q read Off: it is being powered back on through that BMC (attempt %d)", pin.Address, fails+1)
}

// bookingUnended reports whether rec shows the booking made at at with
// no Returned of its own: its command (its task) was not recorded ended.
func bookingUnended(rec *v1alpha1.RebootRecord, at string) bool {
	s := rec.Spec.PowerOnSent
	if s == nil || s.At != at {
		return false
	}
	_, returned := bookingReturned(s)
	return !returned
}

// finishedOn reports whether o ended.
func (o *pinnedOn) finishedOn() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// runPinnedOn makes o's attempt for the host old (a copy of its
// BareMetalHost) through the BMC o.pin names (StaleReads after it began,
// and only if still owed when checked after the BMC's last answer before
// the On, and recorded in the record first: markSent), under parent
// (cancelled by Close), bounded by the pool's timeouts and pinnedReadLimit, through
// Powers.Guard if set. Its end requeues the host (Powers.Done): at once
// on success, when its back-off is over on failure.
func (p *Powers) runPinnedOn(parent context.Context, old *metal3.BareMetalHost, o *pinnedOn) {
	defer func() {
		p.mu.Lock()
		o.end = time.Now()
		settled := o.settledAt(p.staleReads())
		p.mu.Unlock()
		close(o.done)
		if done := p.Done; done != nil {
			if o.sent {
				time.AfterFunc(time.Until(settled), func() { done(old.Name) }) // resolvedHold's window ends
			}
			if o.on {
				done(old.Name)
			} else {
				time.AfterFunc(time.Until(o.retryAt()), func() { done(old.Name) })
			}
		}
	}()
	// The mark that owes this power-on was just written: a write made
	// with it in view (spec.bmc restored, spec.online false, a new
	// request) is given StaleReads to land before the host and record are
	// read again, uncached, and the On is sent only if still owed
	// (stillOwed).
	settle := time.NewTimer(p.staleReads())
	select {
	case <-settle.C:
	case <-parent.Done():
		settle.Stop()
		o.err = parent.Err()
		return
	}
	ctx, cancel := context.WithTimeout(parent, pinnedReadLimit)
	defer cancel()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = o.pin.Address, o.pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = o.pin.DisableCertificateVerification
	key := old.Name + "\x00pinned-on"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		o.err = err
		return
	}
	defer p.pool().Forget(key)
	if p.Guard != nil {
		pc = p.Guard(pc)
	}
	// The On is sent only if still owed when checked after the pinned
	// BMC's last answer before it (its state read: a slow BMC's reads
	// may take CallTimeout each), and only once the record says it is
	// being sent (markSent).
	var q power.Queued
	err = p.sendPinnedOn(power.WithQueued(ctx, &q), pc, old, o)
	p.mu.Lock()
	o.queued = q.Queued()
	p.mu.Unlock()
	if err == nil && o.queued {
		// Accepted for later: the On may land until its task ended, also
		// after the call's deadline. The record says so first (Task,
		// Until moved to the end of the wait), then the task is followed
		// until it ended or the host reads On, at most TaskLimit
		// (TestReview39_QueuedOnLandsAfterDeadlineUnfencesHost).
		p.markTask(parent, old.Name, o, q.Monitor())
		if !followTask(parent, &q, pc.State, power.StateOn, pinnedTaskPoll, p.taskLimit()) {
			o.err = fmt.Errorf("the pinned BMC accepted the power-on as task %s, which had not ended after %s: %w",
				cmp.Or(q.Monitor(), noTaskNamed), p.taskLimit(), ErrTaskOverdue)
			return
		}
		p.mu.Lock()
		o.taskEnded = true
		p.mu.Unlock()
	}
	p.markReturned(parent, old.Name, o, err)
	if err != nil {
		o.err = err
		return
	}
	// A reading begun earlier may echo the host off from before the
	// power-on (one the BMC queued was followed above until its task
	// ended or the host read On; TestReview39n_AcceptedOnShortensWaitNoRestart).
	wait := p.staleReads()
	t := time.NewTimer(wait)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		o.err = ctx.Err()
		return
	}
	s, err := pc.State(ctx)
	switch {
	case err != nil:
		o.err = fmt.Errorf("power reading after the power-on: %w", err)
	case s != power.StateOn:
		o.err = errors.New("the power reading after the power-on is " + s.String())
	default:
		o.on = true
	}
}

// forgetPinnedOn drops host name's power-on attempt, for a host that is
// gone (p.mu held): one that sent nothing and ended goes; one still
// running, or whose On may have been sent, is kept as resolved (its mark
// went with the host), so that a host created again under the same name
// is sent nothing until it settled (resolvedHold), also when its
// RebootRecord, and PowerOnSent with it, went too.
func (p *Powers) forgetPinnedOn(name string) {
	o := p.pinOn[name]
	if o == nil {
		return
	}
	if o.finishedOn() && !o.sent {
		delete(p.pinOn, name)
	} else {
		o.resolved = true
	}
	p.sweepPinnedOn()
}

// earlierHostHold is resolvedHold for host name when it has no record of
// its own (none, or an earlier host's of the same name): a power-on
// attempt of an earlier host of that name, which this process may not
// have seen deleted (Forget), outlived its mark, which went with that
// host or its record.
func (p *Powers) earlierHostHold(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetPinnedOn(name)
	return p.resolvedHold(name)
}

// sweepPinnedOn drops the resolved attempts that settled (ended, and
// StaleReads after their end if their On may have been sent), which
// resolvedHold would drop at their host's next pass: a host deleted for
// good has none (p.mu held).
func (p *Powers) sweepPinnedOn() {
	for name, o := range p.pinOn {
		if o.resolved && o.finishedOn() && (!o.sent || !time.Now().Before(o.settledAt(p.staleReads()))) {
			delete(p.pinOn, name)
		}
	}
}

// resolvePinnedOn marks host name's power-on attempt, if any, as
// outliving the mark it was made for (spec.bmc restored, or the new BMC
// accepted), and returns resolvedHold's verdict.
func (p *Powers) resolvePinnedOn(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.pinOn[name]; o != nil {
		o.resolved = true
	}
	return p.resolvedHold(name)
}

// resolvedHold is nil unless host name has a power-on attempt through its
// pinned BMC that outlived its mark and that may still be acted on by the
// BMC: then an error wrapping ErrInFlight, so that the reboot package
// takes no evidence from the host and sends it nothing while that On may
// land, as after any power call of its own: until the attempt ended and,
// if its On may have been sent, StaleReads after its end (a reading
// begun then no longer echoes the host from before that On). A settled
// attempt is dropped (p.mu held).
func (p *Powers) resolvedHold(name string) error {
	o := p.pinOn[name]
	if o == nil || !o.resolved {
		return nil
	}
	if !o.finishedOn() {
		return fmt.Errorf("host %s: a power-on through its previously pinned BMC %q is still running; the host is left as it is "+
			"until it ends: %w", name, o.pin.Address, ErrInFlight)
	}
	if at := o.settledAt(p.staleReads()); o.sent && time.Now().Before(at) {
		return fmt.Errorf("host %s: a power-on through its previously pinned BMC %q was sent; the host's power is read again "+
			"from %s on: %w", name, o.pin.Address, at.UTC().Format(time.RFC3339Nano), ErrInFlight)
	}
	delete(p.pinOn, name)
	return nil
}

// staleReads is p.StaleReads, or the reboot package's default.
func (p *Powers) staleReads() time.Duration {
	if p.StaleReads > 0 {
		return p.StaleReads
	}
	return reboot.DefaultConfig().StaleReads
}

// stillOwed reads, uncached, the host old names and its record just
// before o's On is sent (after the pinned BMC's last answer before it):
// its record and "" if the record still owes that power-on (its
// PowerOnThrough is o.pin), the mark still stands (spec.bmc is not the
// marked BMC), the host is the same one, still rebootkit's (stillOurs),
// and onEligible holds; else why not (the On is then not sent).
func (p *Powers) stillOwed(ctx context.Context, old *metal3.BareMetalHost, o *pinnedOn) (*v1alpha1.RebootRecord, string) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: old.Name}
	var bmh metal3.BareMetalHost
	if err := p.Secrets.Get(ctx, key, &bmh); err != nil {
		return nil, fmt.Sprintf("the host could not be read again (%v)", mapError("host", p.Namespace, old.Name, err))
	}
	var rec v1alpha1.RebootRecord
	if err := p.Secrets.Get(ctx, key, &rec); err != nil {
		return nil, fmt.Sprintf("its reboot record could not be read again (%v)", mapError("record of", p.Namespace, old.Name, err))
	}
	switch {
	case bmh.UID != old.UID || rec.Spec.HostUID != string(bmh.UID):
		return nil, "the host was replaced"
	case rec.Spec.PowerOnThrough == nil || *rec.Spec.PowerOnThrough != o.pin:
		return nil, "its record no longer owes that power-on"
	case rec.Spec.BMCChanged == nil || samePin(&bmh, rec.Spec.BMCChanged):
		return nil, "its BMC was restored or accepted"
	}
	if why := p.stillOurs(old, &bmh); why != "" {
		return nil, why
	}
	return &rec, onEligible(&bmh)
}

// stillOurs is "" if bmh, read again just before a power-on Powers sends
// itself, is still rebootkit's to power, else why not: by Powers.Ownership
// (the reconciler's Ownership.Ours) if set; in any case a host that was
// detached when the attempt began (old) must still be, as the
// baremetal-operator takes a host back the moment its annotation goes
// (TestReview39ab_PinnedOnSentAfterOperatorTookHostBack).
func (p *Powers) stillOurs(old, bmh *metal3.BareMetalHost) string {
	if p.Ownership != nil {
		if ours, why := p.Ownership.Ours(bmh); !ours {
			return "the host is no longer rebootkit's: " + why
		}
		return ""
	}
	if Detached(old) && !Detached(bmh) {
		return fmt.Sprintf("the host is no longer detached (annotation %s, status.operationalStatus %q): the baremetal-operator may "+
			"power it again", metal3.DetachedAnnotation, bmh.Status.OperationalStatus)
	}
	return ""
}

// pinnedOnErr is err (wrapping ErrBMCChanged), also wrapping ErrInFlight
// when a power-on owed through the pinned BMC goes on (owed): the
// controller then requeues the host within IdlePoll rather than a
// minute, so that the attempt's outcome is acted on.
func pinnedOnErr(err error, owed bool) error {
	if !owed {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrInFlight)
}
