package plan

import (
	"context"
	"errors"
	"slices"
	"sync"
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
// Each pass has two rounds. In the first, each plan in turn has an equal
// share of what is left of the pass among the plans that act and have
// not had their turn yet (a plan that does not act takes one such share
// at most, and counts for none of the others'), so the time a plan leaves
// unused goes to the plans after it; and one plan cut short in the last
// pass (each in turn, in the order of their UUIDs) has half of the pass
// when other plans act, all of it when none does. In the second round,
// the plans cut short in the first run again, each with an equal share
// of what is left: the time the later plans left unused goes back to the
// earlier ones. So every plan whose pass fits half of the pass moves at
// least once every as many passes as there are plans cut short, and no
// plan ever has less than its equal share of half of the pass.
type Turns struct {
	mu sync.Mutex
	// cut are the plans cut short in the last pass; favoured the UUID of
	// the last one that had the long turn.
	cut      map[string]bool
	favoured string
}

// Run runs pass for each plan of plans, each under its own share of ctx
// (see Turns), and returns the error of each plan's last pass in plans'
// order (nil for a pass that succeeded). When stop is set and holds for
// a pass's error, Run returns at once with that error as its second
// result (the first then is nil).
func (t *Turns) Run(ctx context.Context, plans []Turn, stop func(error) bool, pass func(ctx context.Context, uuid string) error) ([]error, error) {
	errs := make([]error, len(plans))
	acting := 0
	for _, p := range plans {
		acting += b2i(p.Acts)
	}
	long := t.longTurn(plans)
	var cut []int
	run := func(i, n int) error {
		pctx, cancel := Share(ctx, n, 0)
		err := pass(pctx, plans[i].UUID)
		short := err != nil && ctx.Err() == nil && (pctx.Err() != nil || errors.Is(err, ErrCallTimeout))
		cancel()
		errs[i] = err
		if err != nil && stop != nil && stop(err) {
			return err
		}
		if short {
			cut = append(cut, i)
		}
		return nil
	}
	order := make([]int, 0, len(plans))
	if long >= 0 {
		order = append(order, long)
	}
	for i := range plans {
		if i != long {
			order = append(order, i)
		}
	}
	for _, i := range order {
		n := acting
		switch {
		case i == long && acting > 1:
			n = 2
		case !plans[i].Acts:
			n = acting + 1
		}
		if err := run(i, n); err != nil {
			return nil, err
		}
		acting -= b2i(plans[i].Acts)
	}
	first := cut
	cut = nil
	for k, i := range first {
		if ctx.Err() != nil {
			cut = append(cut, first[k:]...)
			break
		}
		if err := run(i, len(first)-k); err != nil {
			return nil, err
		}
	}
	t.remember(plans, cut)
	return errs, nil
}

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
