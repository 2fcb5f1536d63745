package power

import (
	"context"
	"sync"
	"sync/atomic"
)

// Queued tells a caller whether the BMC answered a power command of its
// call by accepting it for later (Redfish 202 Accepted, a task) rather
// than carrying it out or refusing it: a nil error then does not mean
// the command took effect by the time the call returned; it may take
// effect at any time later, also after the call's deadline, until the
// BMC's task for it ended. The adapter that noted it may also tell how
// to read that task (NoteTask; power/redfish follows the Redfish task
// monitor): TaskEnded then says whether the task ended (it can no longer
// take effect). Attach one to a call's context with WithQueued; adapters
// that can tell report it with NoteQueued or NoteTask (power/redfish
// does). The zero value is ready to use; it is safe for concurrent use.
type Queued struct {
	v  atomic.Bool
	mu sync.Mutex
	// monitor and ended: the task's address and how to read it
	// (NoteTask), if known.
	monitor string
	ended   func(context.Context) (bool, error)
}

// Queued reports whether a command of a call whose context carried q was
// accepted for later.
func (q *Queued) Queued() bool { return q.v.Load() }

// Monitor is the address (a path on the BMC) of the task of the command
// accepted for later, "" if the adapter gave none.
func (q *Queued) Monitor() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.monitor
}

// TaskEnded reads, within ctx, whether the task of the command accepted
// for later ended, so that it can no longer take effect (power/redfish:
// its monitor says Completed, Exception, Killed or Cancelled, or answers
// with the command's own outcome). Without a way to read the task
// (Monitor ""), it is false with no error: only a reading of the host's
// power can then tell that the command took effect.
func (q *Queued) TaskEnded(ctx context.Context) (bool, error) {
	q.mu.Lock()
	f := q.ended
	q.mu.Unlock()
	if f == nil {
		return false, nil
	}
	return f(ctx)
}

type queuedKey struct{}

// WithQueued returns ctx carrying q, for NoteQueued.
func WithQueued(ctx context.Context, q *Queued) context.Context {
	return context.WithValue(ctx, queuedKey{}, q)
}

// NoteQueued records, in the Queued ctx carries (if any), that the BMC
// accepted a power command of this call for later. Adapters call it.
func NoteQueued(ctx context.Context) {
	if q, ok := ctx.Value(queuedKey{}).(*Queued); ok {
		q.v.Store(true)
	}
}

// NoteTask records, as NoteQueued does, that the BMC accepted a power
// command of this call for later, as the task at monitor, which ended
// reads (Queued.TaskEnded). Adapters call it.
func NoteTask(ctx context.Context, monitor string, ended func(context.Context) (bool, error)) {
	if q, ok := ctx.Value(queuedKey{}).(*Queued); ok {
		q.mu.Lock()
		q.monitor, q.ended = monitor, ended
		q.mu.Unlock()
		q.v.Store(true)
	}
}
