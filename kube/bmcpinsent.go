package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// errNotOwed is why an attempt of a power-on through a pinned BMC sent
// nothing: the power-on was no longer owed when its check ran (markSent).
type errNotOwed struct{ why string }

func (e errNotOwed) Error() string { return "the power-on was not sent: " + e.why }

// sendPinnedOn sends o's power-on through pc (the pinned BMC's
// controller) with markSent as its check (power.CheckedOner; a
// controller without it sends nothing): after the
// BMC's last answer before the On (its login, its state read), the host
// and record are read again and the sending recorded; nothing lies
// between that check and the On but the command itself.
func (p *Powers) sendPinnedOn(ctx context.Context, pc power.Controller, old *metal3.BareMetalHost, o *pinnedOn) error {
	err := onCheckedOf(ctx, pc, func(ctx context.Context) error { return p.markSent(ctx, old, o) })
	var no errNotOwed
	if errors.As(err, &no) {
		return no
	}
	if err != nil {
		return fmt.Errorf("power-on: %w", err)
	}
	return nil
}

// markSent is the check of o's power-on (the host old, a copy of its
// BareMetalHost): it reads the host and its record again, uncached
// (stillOwed), and, if the power-on is still owed and the record shows
// no booking that still holds the host (writeBooking), records that it
// is being sent and until when it may land (RebootRecordSpec.PowerOnSent:
// Until is ctx's deadline, the latest instant the call may reach the
// BMC, plus TaskLimit, for an On the BMC accepts for later) in a
// compare-and-swap on the record it read, so that a write made since
// that reading (spec.bmc restored, a new mark, another booking) sends
// nothing; o.sent is set once it is written. Any error: the On is not
// sent.
func (p *Powers) markSent(ctx context.Context, old *metal3.BareMetalHost, o *pinnedOn) error {
	rec, why := p.stillOwed(ctx, old, o)
	if why != "" {
		return errNotOwed{why}
	}
	w, ok := p.Client.(client.Writer)
	if !ok {
		return errNotOwed{"this Client cannot record the power-on in the record before it is sent"}
	}
	now := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(pinnedReadLimit)
	}
	// The BMC may accept the On for later (a 202) up to the deadline,
	// and carry it out up to TaskLimit after: the booking covers that
	// until the task is recorded (markTask), as the normal path's does,
	// so that a crash between the 202 and that write leaves the host
	// held.
	until := deadline.Add(p.taskLimit())
	// The whole booking is replaced (sentPatch): an earlier one's
	// Returned or Task would end this one's wait early
	// (TestMarkSentReplacesEndedBooking); never one that still holds the
	// host (writeBooking).
	sent := &v1alpha1.PowerOnSent{Address: o.pin.Address, At: stamp(now), Until: stamp(until)}
	held, err := p.writeBooking(ctx, w, rec, old.Name, sent)
	if held != nil {
		return errNotOwed{fmt.Sprintf("its record shows a power command that may still land (%v)", held)}
	}
	if err != nil {
		return errNotOwed{fmt.Sprintf("it could not be recorded in the reboot record first (%v)", mapError("record of", p.Namespace, old.Name, err))}
	}
	p.mu.Lock()
	o.sent, o.sentAt, o.until = true, sent.At, until
	p.mu.Unlock()
	return nil
}

// markReturnedTries bounds markReturned's compare-and-swap retries.
const markReturnedTries = 3

// markReturned records, when o's On was sent (markSent) and its call
// returned with the BMC's answer (err nil, or an answered *power.Error),
// when it returned (PowerOnSent.Returned) in the record of host name, if
// the record still shows that sending: the On landed or was refused by
// then, so sentHold's wait ends StaleReads after that instead of after
// Until, as the in-memory one does (resolvedHold). An On with no answer
// (a timeout: it may still land) moves Until to the reboot package's
// LostLanding from now, as the normal path's does (sendLost: only while
// the booking has no Task and no Returned). Nothing is recorded for an
// On the BMC accepted for later (o.queued: a Redfish 202, a task that may land
// after the answer) until its task was seen to end or the host read On
// (o.taskEnded: then its return is that instant;
// TestReview39n_AcceptedOnShortensRecordWaitAcrossRestart). It is best effort (a
// failed write only leaves the longer wait), bounded by Powers.Timeout,
// under parent.
func (p *Powers) markReturned(parent context.Context, name string, o *pinnedOn, err error) {
	p.mu.Lock()
	sent, at, queued := o.sent, o.sentAt, o.queued && !o.taskEnded
	p.mu.Unlock()
	var pe *power.Error
	switch {
	case !sent || queued:
	case err != nil && !(errors.As(err, &pe) && pe.Answered()):
		// No answer: it may land for LostLanding from now, as the normal
		// path's (sendLost), rather than to the booking's Until.
		booked{p: p, host: name}.sendLost(parent, at)
	default:
		p.markReturnedAt(parent, name, at)
	}
}

// markReturnedAt records now as PowerOnSent.Returned in the record of
// host name if it still shows the booking at (and no Returned): best
// effort, bounded by Powers.Timeout, under parent (markReturned). It
// reports whether it was written.
func (p *Powers) markReturnedAt(parent context.Context, name, at string) bool {
	returned := stamp(time.Now())
	return p.changeBooking(parent, name, at, func(s *v1alpha1.PowerOnSent) (any, bool) {
		return map[string]any{"returned": returned}, s.Returned == "" // recorded already: kept
	})
}

// sentHold is nil unless rec, the record of host name, shows a power
// command (PowerOnSent: a power-on through a pinned BMC, or a command
// through Async that may power the host on) that may still land on the
// host or be echoed by a reading of it: until StaleReads after its Until,
// or after its Returned if it has one (the BMC answered it then, or its
// task was seen to end; one stamped before At belongs to an earlier
// booking and is ignored); one the BMC accepted as a task (Task) with no
// Returned past that, for good (also ErrTaskOverdue), until its task is
// read ended (taskHold) or an administrator removes it. Then an error
// wrapping ErrInFlight, so that no replica sends the host anything nor
// takes evidence from it meanwhile, whatever it keeps in memory (a
// restart, a new leader). A PowerOnSent that does not parse (only the
// controller writes it) holds the host until it is removed.
func (p *Powers) sentHold(rec *v1alpha1.RebootRecord, name string) error {
	s := rec.Spec.PowerOnSent
	if s == nil {
		return nil
	}
	until, err := time.Parse(time.RFC3339Nano, s.Until)
	if err != nil {
		return fmt.Errorf("kube: host %s: its reboot record's powerOnSent.until does not parse, so rebootkit cannot tell whether a "+
			"power-on (or a command the BMC accepted for later that may power it on) through BMC %q may still land: the host is left as it is; once that is past, remove it: "+
			"kubectl -n %s patch rebootrecord %s --type=merge -p '{\"spec\":{\"powerOnSent\":null}}'", name, s.Address, p.Namespace, name)
	}
	ret, returned := bookingReturned(s)
	if returned {
		until = ret // the BMC answered it then, or its task ended
	}
	if at := until.Add(p.staleReads()); s.Task != "" && !returned && !time.Now().Before(at) {
		return fmt.Errorf("host %s: a power-on (or restart or power-button press) through its BMC %q, sent or answered at %s, was accepted by that BMC as task %s, "+
			"which was not seen to end by %s, so it may still land: the host is left as it is; once that task ended or was "+
			"cancelled on the BMC (a GET of it answers Completed, Exception, Killed or Cancelled), remove the record's wait: "+
			"kubectl -n %s patch rebootrecord %s --type=merge -p '{\"spec\":{\"powerOnSent\":null}}': %w (%w)",
			name, s.Address, s.At, s.Task, s.Until, p.Namespace, name, ErrTaskOverdue, ErrInFlight)
	}
	if at := until.Add(p.staleReads()); time.Now().Before(at) {
		return fmt.Errorf("host %s: a power-on (or restart or power-button press) through its BMC %q was sent at %s and may land until %s; the host's "+
			"power is read again from %s on: %w", name, s.Address, s.At, s.Until, at.UTC().Format(time.RFC3339Nano), ErrInFlight)
	}
	return nil
}

// bookingReturned is s's Returned and true if it has one that belongs to
// it: it parses and is not before s's At (a Returned stamped before the
// booking was made is an earlier booking's, kept by a writer that merged
// into it: it ends nothing of this one).
func bookingReturned(s *v1alpha1.PowerOnSent) (time.Time, bool) {
	if s.Returned == "" {
		return time.Time{}, false
	}
	ret, err := time.Parse(time.RFC3339Nano, s.Returned)
	if err != nil {
		return time.Time{}, false
	}
	if at, aerr := time.Parse(time.RFC3339Nano, s.At); aerr != nil || ret.Before(at) {
		return time.Time{}, false
	}
	return ret, true
}

// pinnedTaskPoll is how often the task of a power-on through a pinned
// BMC that the BMC accepted for later is read (followTask).
const pinnedTaskPoll = 500 * time.Millisecond

// noTaskNamed is PowerOnSent.Task for a power-on accepted for later
// whose answer named no task monitor.
const noTaskNamed = "(none named)"

// taskLimit is p.TaskLimit, or DefaultTaskLimit.
func (p *Powers) taskLimit() time.Duration { return cmp.Or(p.TaskLimit, DefaultTaskLimit) }

// markTask records, for o's On that the BMC accepted for later (the task
// at monitor, "" if none named), in the record of host name if it still
// shows that sending, the task (PowerOnSent.Task) and Until moved to the
// end of the wait for it (TaskLimit from now), so that a restarted
// controller or a new leader waits for it too; o.until moves with it. It
// is best effort (a failed write leaves the call's deadline in the
// record), bounded by Powers.Timeout, under parent.
func (p *Powers) markTask(parent context.Context, name string, o *pinnedOn, monitor string) {
	until := time.Now().Add(p.taskLimit())
	p.mu.Lock()
	at := o.sentAt
	if until.After(o.until) {
		o.until = until
	}
	p.mu.Unlock()
	p.rebookTask(parent, name, at, monitor, until)
}

// rebookTask records, in the record of host name if it still shows the
// booking at, that its command was accepted for later as the task at
// monitor ("" if none named: noTaskNamed), waited for until until
// (PowerOnSent.Task and Until; its At kept, so that taskEnded and
// markReturnedAt find it). It reports whether it was written (best
// effort, bounded by Powers.Timeout, under parent).
func (p *Powers) rebookTask(parent context.Context, name, at, monitor string, until time.Time) bool {
	return p.changeBooking(parent, name, at, func(*v1alpha1.PowerOnSent) (any, bool) {
		return map[string]any{"task": cmp.Or(monitor, noTaskNamed), "until": stamp(until)}, true
	})
}
