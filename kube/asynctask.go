package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// taskBooker is a host's controller (Powers.Controller) that records in
// the host's reboot record a power command that may power the host on
// (the normal path's, through Async) before it is sent, and what became
// of it, as the pinned path records its power-on (PowerOnSent), so that
// a restarted controller or a new leader holds the host as sentHold says
// while the command may still land, also if the sender stopped between
// the BMC's answer and its next write.
type taskBooker interface {
	// bookSend records, before the command is sent, that it is being
	// sent and may land until until. It returns the booking's At (""
	// if nothing was recorded: the host has no record, or the Client
	// cannot write; the command goes out as before), or an error
	// wrapping power.ErrNotSent: the booking could not be written, and
	// the command must not be sent.
	bookSend(ctx context.Context, until time.Time) (string, error)
	// bookTask records that the command booked as at ("" if its
	// sending was not recorded) was accepted for later as the task at
	// monitor ("" if none named), waited for until until; it returns
	// the At of the booking that records it ("" if none does).
	bookTask(ctx context.Context, at, monitor string, until time.Time) string
	// taskEnded records that the task of the booking at ended (or the
	// host read the state it was for): the hold ends StaleReads later.
	taskEnded(ctx context.Context, at string)
	// sendAnswered removes the booking at: the BMC answered its command
	// (carried it out or refused it), or it was never sent.
	sendAnswered(ctx context.Context, at string)
	// sendLost records that the command booked as at got no answer: it
	// may still land for the reboot package's LostLanding (Powers:
	// lostLanding) from now.
	sendLost(ctx context.Context, at string)
	// bookingOver reports whether the record no longer shows the booking
	// at unended: its task was read ended (stamped Returned, by any
	// replica: taskHold) or the booking was removed. A record that
	// cannot be read, or is gone, says no.
	bookingOver(ctx context.Context, at string) bool
}

// booked is a host's controller from Powers.Controller: p records its
// commands that may power the host on (taskBooker); every extension of
// the controller it wraps is passed on (TestWrappersForwardExtensions).
type booked struct {
	power.Controller
	p       *Powers
	host    string
	address string
}

// TogglesOff passes on the wrapped controller's reboot.Toggler.
func (b booked) TogglesOff(m power.Mode) bool { return togglesOff(b.Controller, m) }

// TogglesOn passes on the wrapped controller's reboot.OnToggler.
func (b booked) TogglesOn() bool { return togglesOn(b.Controller) }

// Reset passes on the wrapped controller's power.Resetter.
func (b booked) Reset(ctx context.Context) error { return resetOf(ctx, b.Controller) }

// OnChecked passes on the wrapped controller's power.CheckedOner.
func (b booked) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return onCheckedOf(ctx, b.Controller, check)
}

func (b booked) bookSend(ctx context.Context, until time.Time) (string, error) {
	return b.p.bookSend(ctx, b.host, b.address, until)
}

func (b booked) bookTask(ctx context.Context, at, monitor string, until time.Time) string {
	if at == "" {
		// Its sending was not recorded (no record then): recorded now,
		// as a whole booking.
		return b.p.bookTask(ctx, b.host, b.address, time.Now(), monitor, until)
	}
	// The booking made before the command says so (its At kept); if
	// the record shows another booking since, or the write fails, the
	// one made before the command holds the host to its own Until,
	// which covers TaskLimit after any answer of the call.
	if b.p.rebookTask(ctx, b.host, at, monitor, until) {
		return at
	}
	return ""
}

func (b booked) taskEnded(ctx context.Context, at string) { b.p.markReturnedAt(ctx, b.host, at) }

func (b booked) sendAnswered(ctx context.Context, at string) {
	b.p.changeBooking(ctx, b.host, at, func(*v1alpha1.PowerOnSent) (any, bool) { return nil, true })
}

func (b booked) sendLost(ctx context.Context, at string) {
	until := time.Now().Add(b.p.lostLanding())
	b.p.changeBooking(ctx, b.host, at, func(s *v1alpha1.PowerOnSent) (any, bool) {
		_, ended := bookingReturned(s)
		return map[string]any{"until": stamp(until)}, s.Task == "" && !ended
	})
}

// bookingOver reads the host's record (Powers.bookingOver).
func (b booked) bookingOver(ctx context.Context, at string) bool {
	return b.p.bookingOver(ctx, b.host, at)
}

// errNotBooked is the error of a command Async did not send because its
// booking could not be written first: the command was not sent
// (power.ErrNotSent), and the BMC is not to blame (class busy: the next
// pass decides again).
func errNotBooked(host string, why error) error {
	return &power.Error{Op: "command", Class: power.ClassBusy, Err: power.ErrNotSent,
		Message: fmt.Sprintf("not sent: host %s's reboot record could not say first that a power command that may power it on is being sent (%v)", host, why)}
}

// bookSend writes, in a compare-and-swap on the record of host name read
// uncached, that a power command that may power the host on is being
// sent through the BMC at address now and may land until until
// (PowerOnSent{At: now, Until: until}, the whole booking replaced:
// sentPatch), before it is sent, so that every replica holds the host
// (sentHold) while it may land, also if this process stops before its
// answer. The record shows no booking that still holds the host (one
// made since this pass read it): else nothing is written and the error
// says why (writeBooking, the rule the pinned path's markSent shares). A
// host without a record, or a Client that cannot write, records nothing
// ("", nil). Any other failure is an error wrapping power.ErrNotSent: the
// command is not sent. Bounded by Powers.Timeout, under parent.
func (p *Powers) bookSend(parent context.Context, name, address string, until time.Time) (string, error) {
	w, ok := p.Client.(client.Writer)
	if !ok {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(parent, p.readTimeout())
	defer cancel()
	key := types.NamespacedName{Namespace: p.Namespace, Name: name}
	var last error
	for range markReturnedTries {
		var rec v1alpha1.RebootRecord
		if err := p.Secrets.Get(ctx, key, &rec); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", errNotBooked(name, mapError("record of", p.Namespace, name, err))
		}
		sent := &v1alpha1.PowerOnSent{Address: address, At: stamp(time.Now()), Until: stamp(until)}
		held, err := p.writeBooking(ctx, w, &rec, name, sent)
		if held != nil {
			return "", errNotBooked(name, held)
		}
		if err == nil {
			return sent.At, nil
		}
		last = mapError("record of", p.Namespace, name, err)
		if !apierrors.IsConflict(err) {
			break
		}
	}
	return "", errNotBooked(name, last)
}

// bookTask writes, in a compare-and-swap on the record of host name, that
// a power command through the BMC at address was accepted at answer for
// later as the task at monitor, waited for until until
// (PowerOnSent{At: answer, Until: until, Task}, the whole booking
// replaced: sentPatch, so that an earlier booking's Returned does not
// end its wait): sentHold then holds the host in every replica until the
// task is recorded ended (taskEnded) and StaleReads passed, and past
// Until with no such record until its task monitor is read ended
// (taskHold; ErrTaskOverdue meanwhile). A host without a record (or a
// Client that cannot write) records nothing (""). Bounded by
// Powers.Timeout, under parent.
func (p *Powers) bookTask(parent context.Context, name, address string, answer time.Time, monitor string, until time.Time) string {
	w, ok := p.Client.(client.Writer)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(parent, p.readTimeout())
	defer cancel()
	key := types.NamespacedName{Namespace: p.Namespace, Name: name}
	sent := &v1alpha1.PowerOnSent{Address: address, At: stamp(answer), Until: stamp(until), Task: cmp.Or(monitor, noTaskNamed)}
	for range markReturnedTries {
		var rec v1alpha1.RebootRecord
		if p.Secrets.Get(ctx, key, &rec) != nil {
			return ""
		}
		err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnSent": sentPatch(sent)}}))
		if err == nil {
			return sent.At
		}
		if !apierrors.IsConflict(err) {
			return ""
		}
	}
	return ""
}

// lostLanding is how long after a power command's call returned with no
// answer it may still land: the reboot package's LostLanding for
// Powers.LostLanding and SoftTimeout (set to the Reconciler's), as
// Async.Settled is asked with.
func (p *Powers) lostLanding() time.Duration {
	return reboot.LostLandingOf(reboot.Config{SoftTimeout: p.SoftTimeout, LostLanding: p.LostLanding})
}

// commandAnswered reports whether err, the outcome of a power command
// that was not accepted for later, says the command can no longer land:
// nil (carried out), never sent, or refused by the BMC's own answer
// (resetRefused, or any answered *power.Error).
func commandAnswered(err error) bool {
	var pe *power.Error
	return err == nil || resetRefused(err) || errors.As(err, &pe) && pe.Answered()
}

// bookSend passes the recording on to the guarded controller, if it
// records (taskBooker), while the lease is held: otherwise the command
// would be refused (ErrNotLeader), and so is its booking.
func (c *guarded) bookSend(ctx context.Context, until time.Time) (string, error) {
	b, ok := c.pc.(taskBooker)
	if !ok {
		return "", nil
	}
	if c.g.remaining() <= 0 {
		return "", ErrNotLeader
	}
	return b.bookSend(ctx, until)
}

// bookTask passes the recording on to the guarded controller, if it
// records (taskBooker).
func (c *guarded) bookTask(ctx context.Context, at, monitor string, until time.Time) string {
	if b, ok := c.pc.(taskBooker); ok {
		return b.bookTask(ctx, at, monitor, until)
	}
	return ""
}

func (c *guarded) taskEnded(ctx context.Context, at string) {
	if b, ok := c.pc.(taskBooker); ok {
		b.taskEnded(ctx, at)
	}
}

func (c *guarded) sendAnswered(ctx context.Context, at string) {
	if b, ok := c.pc.(taskBooker); ok {
		b.sendAnswered(ctx, at)
	}
}

func (c *guarded) sendLost(ctx context.Context, at string) {
	if b, ok := c.pc.(taskBooker); ok {
		b.sendLost(ctx, at)
	}
}

// bookingOver passes the reading on to the guarded controller, if it
// records (taskBooker): a read, allowed without the lease.
func (c *guarded) bookingOver(ctx context.Context, at string) bool {
	b, ok := c.pc.(taskBooker)
	return ok && b.bookingOver(ctx, at)
}

// bookingOver reports whether the record of host name, read uncached
// (bounded by Powers.Timeout, under parent), no longer shows the booking
// made at at unended (bookingUnended): stamped Returned or removed. A
// record that cannot be read, or is gone, says no.
func (p *Powers) bookingOver(parent context.Context, name, at string) bool {
	if at == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(parent, p.readTimeout())
	defer cancel()
	var rec v1alpha1.RebootRecord
	if p.Secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, &rec) != nil {
		return false
	}
	return !bookingUnended(&rec, at)
}
