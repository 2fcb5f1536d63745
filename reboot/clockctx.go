package reboot

import (
	"context"

	"github.com/rebootkit/rebootkit/internal/clockctx"
)

// ClockBound returns ctx with an Err that also compares the clock
// (time.Now, monotonic) with ctx's deadline: past it, Err returns
// context.DeadlineExceeded even though the deadline's timer has not fired
// yet. A process stopped (SIGSTOP, a long GC, a VM paused whose guest
// clock counts the pause) runs no timers:
// when it resumes, a context whose deadline went by meanwhile is not done
// until its timer's goroutine runs, and a store that checks ctx.Err() just
// before it sends would send a write its Guard no longer covers. The
// Guards' contexts (hold, Fenced, etcd.Leadership.Guard, kube.LeaseGuard)
// are so bound. Done still closes at the timer (Err may be non-nil a
// moment before Done is closed); contexts derived from the result check
// their own deadline only when their timer fires, so check this one, or
// bound them too (power.Pool bounds the contexts it derives for calls).
//
// It narrows the gap, it does not close it: a process paused after the
// check and before its write leaves the host can still land one write
// after the lease's end, unless the store fences the write itself (an
// etcd transaction comparing the election key: etcd.Leadership.Cmp).
// The clock is the process's monotonic clock: on a host suspended, or a
// VM whose monotonic clock stops while it is paused, it does not count
// the pause, and neither ClockBound nor a lease measured on it can tell
// (the Guards' assumption that the processes' clocks run at one rate).
// A ctx without a deadline is returned as it is.
func ClockBound(ctx context.Context) context.Context { return clockctx.Bound(ctx) }
