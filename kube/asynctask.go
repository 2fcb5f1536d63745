package kube

import (
	"cmp"
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// taskBooker is a host's controller (Powers.Controller) that records in
// the host's reboot record a power command its BMC accepted for later
// (the normal path's: Async), as the pinned path records its power-on
// (PowerOnSent with Task), so that a restarted controller or a new
// leader holds the host as sentHold says while the task may still run.
type taskBooker interface {
	// bookTask records the command accepted at answer for later, whose
	// task is at monitor ("" if none named), waited for until until; it
	// returns the recording's At ("" if nothing was recorded).
	bookTask(ctx context.Context, answer time.Time, monitor string, until time.Time) string
	// taskEnded records that the task recorded as at ended (or the host
	// read the state it was for): the hold ends StaleReads later.
	taskEnded(ctx context.Context, at string)
}

// booked is a host's controller from Powers.Controller: p records its
// commands the BMC accepted for later (taskBooker); every extension of
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

func (b booked) bookTask(ctx context.Context, answer time.Time, monitor string, until time.Time) string {
	return b.p.bookTask(ctx, b.host, b.address, answer, monitor, until)
}

func (b booked) taskEnded(ctx context.Context, at string) { b.p.markReturnedAt(ctx, b.host, at) }

// bookTask writes, in a compare-and-swap on the record of host name, that
// a power command through the BMC at address was accepted at answer for
// later as the task at monitor, waited for until until
// (PowerOnSent{At: answer, Until: until, Task}): sentHold then holds the
// host in every replica until the task is recorded ended (taskEnded) and
// StaleReads passed, and past Until with no such record leaves it as it
// is (ErrTaskOverdue). A host without a record (or a Client that cannot
// write) records nothing (""). Bounded by Powers.Timeout, under parent.
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
		err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnSent": sent}}))
		if err == nil {
			return sent.At
		}
		if !apierrors.IsConflict(err) {
			return ""
		}
	}
	return ""
}

// bookTaskOf records, if pc is a taskBooker, the command accepted at
// answer for later (q) as bookTask does, waited for until until.
func bookTaskOf(ctx context.Context, pc power.Controller, q *power.Queued, answer, until time.Time) (taskBooker, string) {
	b, ok := pc.(taskBooker)
	if !ok {
		return nil, ""
	}
	return b, b.bookTask(ctx, answer, q.Monitor(), until)
}

// bookTask passes the recording on to the guarded controller, if it
// records (taskBooker).
func (c *guarded) bookTask(ctx context.Context, answer time.Time, monitor string, until time.Time) string {
	if b, ok := c.pc.(taskBooker); ok {
		return b.bookTask(ctx, answer, monitor, until)
	}
	return ""
}

func (c *guarded) taskEnded(ctx context.Context, at string) {
	if b, ok := c.pc.(taskBooker); ok {
		b.taskEnded(ctx, at)
	}
}
