package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultCallTimeout is how long one fleet call of a pass may take at most
// when the Executor's CallTimeout is 0.
const DefaultCallTimeout = 30 * time.Second

// callShare is the share of what is left of a plan's pass (its
// context's deadline) that one fleet call may take at most while three
// other actions of the pass or more wait after it: a call that never
// answers leaves them three quarters of its time. With fewer left, a call
// has an equal share among them, and the last one all that is left: no
// action of its plan waits after it (a server whose calls ran out of time
// lately is asked last, so it has all that the others left). When its
// plan shares the executor's pass with other plans (Turns), a call has at
// most half of what is left of the executor's pass, however much its
// plan's share is, and in its plan's long turn (which has at least the
// second half of the pass) half of the whole pass: one BMC that never
// answers holds no pass for more than half of it, and a call that fits
// half of the pass answers in its plan's long turn, however much of the
// pass the plans before it used.
const callShare = 4

// Share returns a context that ends when ctx does, or earlier: after
// limit (when positive), and after a 1/n share of the time left before
// ctx's deadline (when it has one). It bounds one part of a pass (a fleet
// call, one plan of several) so that a part that hangs never uses up the
// whole pass. n below 1 counts as 1. Call cancel when the part is done.
func Share(ctx context.Context, n int, limit time.Duration) (context.Context, context.CancelFunc) {
	d, bounded := limit, limit > 0
	if deadline, ok := ctx.Deadline(); ok {
		if share := time.Until(deadline) / time.Duration(max(n, 1)); !bounded || share < d {
			d = share
		}
		bounded = true
	}
	if !bounded {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// slowCalls remembers, for every Executor of the process, the servers
// (by plan) one of whose fleet calls ran out of its time in a recent
// pass: their actions are taken after every other action of the next
// passes (not first in every pass, ahead of everything else), until one
// answers in time. At most maxSlowCalls are kept (all forgotten when
// full: they are then taken in the decision's order again).
var slowCalls struct {
	sync.Mutex
	m map[string]bool
}

const maxSlowCalls = 4096

func slowKey(planUUID, server string) string { return planUUID + "\x00" + server }

// markSlow records whether a call for server of plan ran out of its time.
func markSlow(planUUID, server string, slow bool) {
	k := slowKey(planUUID, server)
	slowCalls.Lock()
	defer slowCalls.Unlock()
	switch {
	case !slow:
		delete(slowCalls.m, k)
	case slowCalls.m == nil || len(slowCalls.m) >= maxSlowCalls:
		slowCalls.m = map[string]bool{k: true}
	default:
		slowCalls.m[k] = true
	}
}

// slowLast returns acts with the actions of the servers whose calls ran
// out of time lately after the others, each group in the decision's order
// (acts is not modified).
func slowLast(planUUID string, acts []Action) []Action {
	slowCalls.Lock()
	defer slowCalls.Unlock()
	if len(slowCalls.m) == 0 {
		return acts
	}
	out := slices.Clone(acts)
	slices.SortStableFunc(out, func(a, b Action) int {
		return b2i(slowCalls.m[slowKey(planUUID, a.Server)]) - b2i(slowCalls.m[slowKey(planUUID, b.Server)])
	})
	return out
}

// call runs one fleet call of a pass under its own deadline (Share of the
// pass's context: at most CallTimeout, and at most an equal share of
// what is left among the left actions of the pass, this one included,
// and a quarter of it at most: the last action has all that is left,
// the one before it half; and when its plan shares the executor's pass
// with others, at most half of what is left of the executor's pass, half
// of the whole pass in its plan's long turn, see callShare and Turns), and remembers whether it ran out of its own time
// (its deadline passed, whether or not the pass's did: the last action's
// deadline is the pass's own).
func (e *Executor) call(ctx context.Context, left int, a Action, f func(context.Context) error) error {
	limit := e.CallTimeout
	if limit <= 0 {
		limit = DefaultCallTimeout
	}
	if sp, shared := ctx.Value(sharedPassKey{}).(sharedPass); shared {
		if half := sp.callCap(); half < limit {
			limit = max(half, time.Nanosecond)
		}
	}
	start := time.Now()
	cctx, cancel := Share(ctx, min(callShare, left), limit)
	defer cancel()
	err := f(cctx)
	deadline, _ := cctx.Deadline()
	timedOut := err != nil && !time.Now().Before(deadline) && !errors.Is(context.Cause(ctx), context.Canceled)
	markSlow(a.PlanUUID, a.Server, timedOut)
	if !timedOut {
		return err
	}
	took := time.Since(start).Round(time.Millisecond)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%s, its share of the pass); asked again by the next pass, after the other actions", ErrCallTimeout, took)
	}
	// The fleet answered, late, with its own error (a fleet that ignores
	// its context): both are kept, so that errors.Is finds either and the
	// operator reads the fleet's answer.
	return fmt.Errorf("%w (%s, its share of the pass; asked again by the next pass, after the other actions); the fleet answered late: %w", ErrCallTimeout, took, err)
}

// ErrCallTimeout: a fleet call of a pass did not answer within its own
// deadline (Executor.CallTimeout, at most a quarter of what was left of
// the pass, or its equal share among the pass's last actions, see
// callShare).
var ErrCallTimeout = errors.New("plan: the fleet did not answer in time")
