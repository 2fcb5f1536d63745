package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// overdueReread is how long a reading of an overdue booking's task
// monitor that did not find the task ended is kept before a pass reads
// the monitor again (taskHold).
const overdueReread = 30 * time.Second

// taskRead is one reading of the task monitor an overdue booking of a
// host's record names (Powers.tasks, at most one per host), run in a
// goroutine of its own.
type taskRead struct {
	at, task string        // the booking's At and Task
	done     chan struct{} // closed when the reading ended
	begin    time.Time
	// Set before done is closed:
	end     time.Time
	reading power.TaskReading
	cleared bool  // the task was read ended or gone, and the booking stamped Returned
	err     error // why the monitor could not be read, or the stamp written
}

// finished reports whether r ended.
func (r *taskRead) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// bookedBMC is the BMC, among those rec (a host's record) trusts with
// their credentials and TLS settings (its pin, the power-on it owes
// through one, its BMCChanged mark, its last BMC: written by the
// controller or an administrator, never by a reboot client), whose
// address is address; nil if none is.
func bookedBMC(rec *v1alpha1.RebootRecord, address string) *v1alpha1.BMCPin {
	for _, b := range []*v1alpha1.BMCPin{rec.Spec.BMC, rec.Spec.PowerOnThrough, rec.Spec.BMCChanged, rec.Spec.LastBMC} {
		if b != nil && b.Address != "" && b.Address == address {
			return b
		}
	}
	return nil
}

// taskHold is the record's hold of bmh (checkPin) when sentHold said serr
// of its record rec: serr itself unless it is ErrTaskOverdue (a booking
// past its Until whose task no replica saw end: the replica that sent it
// may be gone). Then this replica reads that task's monitor itself, in
// the background (a pass waits for it at most pinnedReadWait, as for a
// pinned reading, and is requeued at its end through Powers.Done),
// through the BMC the booking names, with the credentials and TLS
// settings the record trusts for that address (bookedBMC; none: not
// read), through the pool (its call and connect timeouts; the adapter
// takes the monitor as hostile: power.TaskReader), at most once every
// overdueReread. If the monitor says the task ended, or that the BMC has
// no such task (a 404 or 410, read past the booking's Until, TaskLimit
// after the BMC accepted the command: it no longer runs), the booking is
// stamped Returned (the reading's end, compare-and-swap on its At), and
// the hold ends StaleReads after that stamp (sentHold), so that no
// reading that may echo the host from before the task landed counts.
// Until then the host stays held: ErrInFlight while the first reading
// runs, else serr (ErrTaskOverdue, with the fix) and what the last
// reading found (TestReview39aa_SenderGoneEndedTaskHoldsHostForGood).
func (p *Powers) taskHold(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord, serr error) error {
	if !errors.Is(serr, ErrTaskOverdue) {
		return serr
	}
	s := rec.Spec.PowerOnSent
	if s.Task == noTaskNamed {
		return fmt.Errorf("%w; the BMC named no task monitor, so rebootkit cannot read whether it ended", serr)
	}
	pin := bookedBMC(rec, s.Address)
	if pin == nil {
		return fmt.Errorf("%w; rebootkit does not read that task itself: no BMC its record trusts (pin, last BMC) has that address", serr)
	}
	p.mu.Lock()
	if p.tasks == nil {
		p.tasks = map[string]*taskRead{}
	}
	r := p.tasks[bmh.Name]
	if r != nil && (r.at != s.At || r.task != s.Task) {
		if !r.finished() {
			p.mu.Unlock()
			return fmt.Errorf("%w; a reading of an earlier task of it is still running", serr)
		}
		r = nil // another booking's
	}
	if r != nil && r.finished() && !r.cleared && time.Since(r.end) >= overdueReread {
		r = nil // read again
	}
	if r == nil {
		r = p.startTaskRead(bmh, pin, s)
	}
	p.mu.Unlock()
	t := time.NewTimer(pinnedReadWait)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		return fmt.Errorf("host %s: a power command its BMC %q accepted as task %s was not seen to end by %s; rebootkit is reading that "+
			"task's monitor: %w", bmh.Name, s.Address, s.Task, s.Until, ErrInFlight)
	}
	switch {
	case r.cleared:
		// Stamped; this record was read before the stamp, overdue: the
		// next pass reads it (sentHold holds StaleReads after it).
		return fmt.Errorf("host %s: the task %s its BMC %q accepted was read %s at %s; the host's power is read again StaleReads later: %w (%w)",
			bmh.Name, s.Task, s.Address, r.reading, r.end.UTC().Format(time.RFC3339Nano), ErrTaskOverdue, ErrInFlight)
	case r.err != nil:
		return fmt.Errorf("%w; rebootkit reads that task's monitor through that BMC every %s, and it could not at %s (%v)",
			serr, overdueReread, r.end.UTC().Format(time.RFC3339), r.err)
	}
	return fmt.Errorf("%w; rebootkit reads that task's monitor through that BMC every %s, and at %s the task had not ended "+
		"(the wait ends StaleReads after a reading finds it ended or gone)", serr, overdueReread, r.end.UTC().Format(time.RFC3339))
}

// startTaskRead starts a reading of the task monitor of the booking s
// of bmh, through the BMC pin, and keeps it as the host's (p.mu held).
func (p *Powers) startTaskRead(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin, s *v1alpha1.PowerOnSent) *taskRead {
	if p.readCtx == nil {
		p.readCtx, p.readStop = context.WithCancel(context.Background())
	}
	r := &taskRead{at: s.At, task: s.Task, done: make(chan struct{}), begin: time.Now()}
	p.tasks[bmh.Name] = r
	go p.readTask(p.readCtx, bmh.DeepCopy(), *pin, r)
	return r
}

// readTask makes r's reading of its task monitor, for the host old (a
// copy of its BareMetalHost) through the BMC pin, bounded by the pool's
// timeouts and pinnedReadLimit, and cancelled by Close (through parent);
// if the task ended or is gone, it stamps the booking Returned
// (markReturnedAt). Its end requeues the host (Powers.Done) if its pass
// stopped waiting.
func (p *Powers) readTask(parent context.Context, old *metal3.BareMetalHost, pin v1alpha1.BMCPin, r *taskRead) {
	defer func() {
		p.mu.Lock()
		r.end = time.Now()
		p.mu.Unlock()
		close(r.done)
		if p.Done != nil && r.end.Sub(r.begin) >= pinnedReadWait {
			p.Done(old.Name)
		}
	}()
	ctx, cancel := context.WithTimeout(parent, pinnedReadLimit)
	defer cancel()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = pin.Address, pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = pin.DisableCertificateVerification
	key := old.Name + "\x00task"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		r.err = err
		return
	}
	defer p.pool().Forget(key)
	tr, ok := pc.(power.TaskReader)
	if !ok {
		r.err = errors.New("the BMC's power adapter cannot read a task monitor")
		return
	}
	r.reading, r.err = tr.ReadTask(ctx, r.task)
	if r.err != nil || r.reading == power.TaskNotEnded {
		return
	}
	if !p.markReturnedAt(parent, old.Name, r.at) {
		r.err = fmt.Errorf("the task was read %s, but the reboot record could not be stamped", r.reading)
		return
	}
	r.cleared = true
}

// sweepTasks drops the task readings that ended more than overdueReread
// and pinnedReadKeep ago (p.mu held).
func (p *Powers) sweepTasks() {
	for name, r := range p.tasks {
		if r.finished() && time.Since(r.end) > overdueReread+pinnedReadKeep {
			delete(p.tasks, name)
		}
	}
}
