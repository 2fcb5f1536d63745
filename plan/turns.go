package plan

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Turn is one plan of an executor's pass, for Turns.Run: Acts says
// whether its pass can act on the fleet (Acts); a plan that cannot still
// has its pass, but its cheap pass takes no share from the others.
type Turn struct {
	UUID string
	Acts bool
}

// Acts reports whether a pass of the plan can act on the fleet or has
// reboots to follow: it runs, or its index lists reboots in flight. A
// plan created and not run, or stopped with nothing in flight, has a
// cheap pass.
func (v View) Acts() bool {
	return v.State == StateRunning || len(v.Index.InFlight) > 0
}

// Turns shares the time of an executor's passes (a context's deadline)
// among the plans of each pass, and remembers which plans were cut short
// (their share ran out, or one of their fleet calls did) for the next
// pass. The zero value is ready; it is safe for concurrent use.
//
// The plans that act run first, each with an equal share of what is left
// among the plans that act and have not had their turn yet; the plans
// that do not act run after them, each with an equal share of what the
// plans that act left, among them. So the time a plan leaves unused goes
// to the plans after it, and a plan that does not act never takes the
// time of one that does: it has only what they left.
//
// One plan that acts and was cut short in the last pass (each in turn, in
// the order of their UUIDs) has the long turn: it runs last, with
// everything the others left of the pass, and they share the first half
// of it (all of it when no plan has the long turn). So every plan that
// acts and whose pass fits half of the pass moves at least once every as
// many passes as there are plans that act cut short. Among the plans that
// do not act, one cut short in the last pass has the same turn within
// what the plans that act left: it runs last of them, with all the others
// left of it, and they share the first half of it; a plan that does not
// act never has the long turn of the pass.
// When a pass has more than one plan, each fleet call of a plan's pass
// has at most half of what is left of the executor's pass, and in its
// plan's long turn half of the whole pass (which that turn has, whatever
// the plans before it used), besides its share of its plan's
// (Executor.CallTimeout): one call that never answers holds no pass for
// more than half of it, and a call that fits half of the pass answers in
// its plan's long turn.
// A plan's pass runs once per pass: a plan cut short is not run again
// from its read in the same pass (that would throw its first try's work
// away); it waits for its long turn.
type Turns struct {
	mu sync.Mutex
	// cut are the plans cut short in the last pass; favoured the UUID of
	// the last plan that acts and had the long turn, favouredIdle of the
	// last one that does not act and had its turn among those.
	cut                    map[string]bool
	favoured, favouredIdle string
}

// Run runs pass for each plan of plans, each under its own share of ctx
// (see Turns), and returns the error of each plan's pass in plans' order
// (nil for a pass that succeeded). When stop is set and holds for a
// pass's error, Run returns at once with that error as its second result
// (the first then is nil).
func (t *Turns) Run(ctx context.Context, plans []Turn, stop func(error) bool, pass func(ctx context.Context, uuid string) error) ([]error, error) {
	start := time.Now()
	errs := make([]error, len(plans))
	long, longIdle := t.longTurns(plans)
	order := make([]int, 0, len(plans))
	acting, idle := 0, 0
	for i, p := range plans {
		if i != long && p.Acts {
			order = append(order, i)
			acting++
		}
	}
	for i, p := range plans {
		if i != longIdle && !p.Acts {
			order = append(order, i)
			idle++
		}
	}
	if longIdle >= 0 {
		order = append(order, longIdle)
	}
	if long >= 0 {
		order = append(order, long)
	}
	// The others share the first half of the pass when a plan has the
	// long turn: it keeps at least the second half.
	first := halfOf(ctx, long >= 0)
	defer first.cancel()
	var idleFirst halved
	defer func() {
		if idleFirst.cancel != nil {
			idleFirst.cancel()
		}
	}()
	var cut []int
	for _, i := range order {
		base, n := first.ctx, 1
		switch {
		case i == long:
			base = ctx
		case i == longIdle:
		case plans[i].Acts:
			n = acting
			acting--
		default:
			// The plans that do not act share what the plans that act
			// left; the first half of it when one of them has its turn.
			if idleFirst.ctx == nil {
				idleFirst = halfOf(first.ctx, longIdle >= 0)
			}
			base, n = idleFirst.ctx, idle
			idle--
		}
		pctx, cancel := Share(base, n, 0)
		if deadline, ok := ctx.Deadline(); ok && len(plans) > 1 {
			pctx = context.WithValue(pctx, sharedPassKey{}, sharedPass{end: deadline, long: i == long, half: deadline.Sub(start) / 2})
		}
		err := pass(pctx, plans[i].UUID)
		short := err != nil && ctx.Err() == nil && (pctx.Err() != nil || errors.Is(err, ErrCallTimeout))
		cancel()
		errs[i] = err
		if err != nil && stop != nil && stop(err) {
			return nil, err
		}
		if short || (err != nil && ctx.Err() != nil) {
			cut = append(cut, i)
		}
	}
	t.remember(plans, cut)
	return errs, nil
}

// halved is a context and its cancel (a no-op when it is its parent).
type halved struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// halfOf returns ctx, or, when half is set and ctx has a deadline, a
// context that ends when the first half of what is left of ctx has
// passed.
func halfOf(ctx context.Context, half bool) halved {
	if deadline, ok := ctx.Deadline(); ok && half {
		c, cancel := context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/2))
		return halved{c, cancel}
	}
	return halved{ctx, func() {}}
}

// sharedPassKey marks the context of a plan's pass that shares the
// executor's pass with other plans (Turns.Run); its value is a
// sharedPass: each of the plan's fleet calls has at most half of what is
// left of the executor's pass, or in the plan's long turn half of the
// whole pass (Executor.call).
type sharedPassKey struct{}

// sharedPass is the value of sharedPassKey.
type sharedPass struct {
	// end is the executor's pass's deadline.
	end time.Time
	// long: the plan has the long turn (the last, with at least the
	// second half of the pass); half is half of the whole pass.
	long bool
	half time.Duration
}

// callCap is the most a fleet call that starts now may take in this
// shared pass: half of what is left of it; in the long turn half of the
// whole pass, which the turn has (it has at least the second half): a
// call that fits half of the pass answers there, whatever the plans
// before it used, and a call that hangs holds the pass for half of it at
// most.
func (s sharedPass) callCap() time.Duration {
	if s.long {
		return s.half
	}
	return time.Until(s.end) / 2
}

// longTurns returns the index in plans of the plan that acts, cut short
// in the last pass, that has the long turn of this one, and of the plan
// that does not act, cut short, that has its turn among those (each the
// next UUID after the last one that had it, wrapping), -1 for none.
func (t *Turns) longTurns(plans []Turn) (acting, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next(plans, true, &t.favoured), t.next(plans, false, &t.favouredIdle)
}

// next returns the index in plans of the plan cut short in the last pass
// whose Acts is acts with the next UUID after *favoured (wrapping), and
// records it in *favoured; -1 when there is none. t.mu is held.
func (t *Turns) next(plans []Turn, acts bool, favoured *string) int {
	var cut []string
	for _, p := range plans {
		if p.Acts == acts && t.cut[p.UUID] {
			cut = append(cut, p.UUID)
		}
	}
	if len(cut) == 0 {
		return -1
	}
	slices.Sort(cut)
	next := cut[0]
	for _, u := range cut {
		if u > *favoured {
			next = u
			break
		}
	}
	*favoured = next
	return slices.IndexFunc(plans, func(p Turn) bool { return p.UUID == next && p.Acts == acts })
}

// remember records the plans (indexes in plans) cut short in this pass.
func (t *Turns) remember(plans []Turn, cut []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cut = make(map[string]bool, len(cut))
	for _, i := range cut {
		t.cut[plans[i].UUID] = true
	}
}
