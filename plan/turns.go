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
// One plan cut short in the last pass (each in turn, in the order of
// their UUIDs) has the long turn: it runs last, with everything the
// others left of the pass, and they share the first half of it (all of
// it when no plan has the long turn). The plans that act run first,
// each with an equal share of what is left among the plans that act and
// have not had their turn yet, one more share kept for the plans that do
// not act (when there are); these run after them, each with an equal
// share of what is left among them. So the time a plan leaves unused
// goes to the plans after it, a plan that does not act never takes the
// time of one that does, and every plan whose pass fits half of the pass
// moves at least once every as many passes as there are plans cut short.
// When a pass has more than one plan, each fleet call of a plan's pass
// has at most half of what is left of the executor's pass, besides its
// share of its plan's (Executor.CallTimeout): one call that never answers
// holds no pass for more than half of it, and a call that fits half of
// the pass answers in its plan's long turn.
// A plan's pass runs once per pass: a plan cut short is not run again
// from its read in the same pass (that would throw its first try's work
// away); it waits for its long turn.
type Turns struct {
	mu sync.Mutex
	// cut are the plans cut short in the last pass; favoured the UUID of
	// the last one that had the long turn.
	cut      map[string]bool
	favoured string
}

// Run runs pass for each plan of plans, each under its own share of ctx
// (see Turns), and returns the error of each plan's pass in plans' order
// (nil for a pass that succeeded). When stop is set and holds for a
// pass's error, Run returns at once with that error as its second result
// (the first then is nil).
func (t *Turns) Run(ctx context.Context, plans []Turn, stop func(error) bool, pass func(ctx context.Context, uuid string) error) ([]error, error) {
	errs := make([]error, len(plans))
	long := t.longTurn(plans)
	order := make([]int, 0, len(plans))
	acting, idle := 0, 0
	for i, p := range plans {
		if i != long && p.Acts {
			order = append(order, i)
			acting++
		}
	}
	for i, p := range plans {
		if i != long && !p.Acts {
			order = append(order, i)
			idle++
		}
	}
	// The others share the first half of the pass when a plan has the
	// long turn: it keeps at least the second half.
	first := ctx
	if deadline, ok := ctx.Deadline(); ok && long >= 0 {
		var cancel context.CancelFunc
		first, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/2))
		defer cancel()
	}
	if long >= 0 {
		order = append(order, long)
	}
	var cut []int
	for _, i := range order {
		base, n := first, 1
		switch {
		case i == long:
			base = ctx
		case plans[i].Acts:
			n = acting + b2i(idle > 0)
			acting--
		default:
			n = idle
			idle--
		}
		pctx, cancel := Share(base, n, 0)
		if deadline, ok := ctx.Deadline(); ok && len(plans) > 1 {
			pctx = context.WithValue(pctx, sharedPassKey{}, deadline)
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

// sharedPassKey marks the context of a plan's pass that shares the
// executor's pass with other plans (Turns.Run); its value is the
// executor's pass's deadline (a time.Time): each of the plan's fleet
// calls has at most half of what is left of it (Executor.call).
type sharedPassKey struct{}

// longTurn returns the index in plans of the plan cut short in the last
// pass that has the long turn of this one (the next UUID after the last
// one that had it, wrapping), or -1 when none was cut short.
func (t *Turns) longTurn(plans []Turn) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cut []string
	for _, p := range plans {
		if t.cut[p.UUID] {
			cut = append(cut, p.UUID)
		}
	}
	if len(cut) == 0 {
		return -1
	}
	slices.Sort(cut)
	next := cut[0]
	for _, u := range cut {
		if u > t.favoured {
			next = u
			break
		}
	}
	t.favoured = next
	return slices.IndexFunc(plans, func(p Turn) bool { return p.UUID == next })
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
