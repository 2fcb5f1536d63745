package power

import (
	"context"
	"sync/atomic"
)

// Queued tells a caller whether the BMC answered a power command of its
// call by accepting it for later (Redfish 202 Accepted, a task the
// adapter does not follow) rather than carrying it out or refusing it:
// a nil error then does not mean the command took effect by the time the
// call returned; it may take effect up to the call's deadline or later.
// Attach one to a call's context with WithQueued; adapters that can tell
// report it with NoteQueued (power/redfish does). The zero value is ready
// to use; it is safe for concurrent use.
type Queued struct{ v atomic.Bool }

// Queued reports whether a command of a call whose context carried q was
// accepted for later.
func (q *Queued) Queued() bool { return q.v.Load() }

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
