package plan

import (
	"context"
	"errors"
	"fmt"
)

// HeadStore is a Store that reads and writes a plan's header alone: its
// settings, state, commands and Index, not its reboot records. An
// operator's command (Run, Stop, Cancel) changes nothing else, so through
// a HeadStore it costs O(1) whatever the plan's size, and its
// compare-and-swap window (between the read and the write) is one round
// trip: an executor rewriting the plan every pass cannot keep it from
// landing (CommandView). BoltStore and the etcd module's Store are
// HeadStores.
type HeadStore interface {
	Store
	// GetHead returns the plan's header (the plan with Reboots nil, and
	// its Version) and its Index, or an error wrapping ErrNotFound or
	// ErrCorrupt.
	GetHead(ctx context.Context, uuid string) (View, error)
	// PutHead writes the header h.Plan (Reboots must be nil) if h.Version
	// is the stored version, else returns an error wrapping ErrConflict.
	// The reboot records and the Index stay as they are stored.
	PutHead(ctx context.Context, h View) error
}

// commandTries bounds how often Command reads again after losing its
// compare-and-swap.
const commandTries = 100

// Command applies an operator's command (Run, Stop, Cancel, or any pure
// change of the plan's header) to a stored plan with compare-and-swap,
// reading again and retrying when an executor or another operator wrote
// in between: the command is never lost, and it is applied to the plan as
// it is now. On a HeadStore it reads and writes the header only (f gets
// the plan without its reboots and must not add any), and the plan it
// returns has no reboots: CommandView returns its Index too. On another
// store f gets and Command returns the whole plan.
func Command(ctx context.Context, s Store, uuid string, f func(Plan) (Plan, error)) (Plan, error) {
	v, err := CommandView(ctx, s, uuid, f)
	return v.Plan, err
}

// Edit applies f to the whole stored plan (its reboots included) with
// compare-and-swap, reading again and retrying when someone wrote in
// between, as Command does on a store that is not a HeadStore. It costs
// O(servers) per try, so at scale it may lose to an executor writing every
// pass: it is for tools and tests that change reboot records; operators'
// commands go through Command.
func Edit(ctx context.Context, s Store, uuid string, f func(Plan) (Plan, error)) (Plan, error) {
	v, err := CommandView(ctx, wholeStore{s}, uuid, f)
	return v.Plan, err
}

// wholeStore hides a store's HeadStore methods.
type wholeStore struct{ Store }

// CommandView is Command returning the plan as a View: on a HeadStore the
// header and its Index, with no reboots loaded; on another store the
// whole plan (FullView).
func CommandView(ctx context.Context, s Store, uuid string, f func(Plan) (Plan, error)) (View, error) {
	hs, head := s.(HeadStore)
	for i := 0; ; i++ {
		var (
			v   View
			err error
		)
		if head {
			v, err = hs.GetHead(ctx, uuid)
		} else {
			var p Plan
			p, err = s.Get(ctx, uuid)
			v = FullView(p)
		}
		if err != nil {
			return View{}, err
		}
		q, err := f(v.Plan)
		if err != nil {
			return v, err
		}
		q.Version = v.Version
		if head {
			if len(q.Reboots) != 0 {
				return v, fmt.Errorf("plan %s: a command changes the plan's header only, not its reboots", uuid)
			}
			err = hs.PutHead(ctx, View{Plan: q, Index: v.Index})
		} else {
			err = s.Put(ctx, q)
		}
		if err == nil {
			if !head {
				return FullView(q), nil
			}
			return View{Plan: q, Index: v.Index, Pos: []int{}}, nil
		}
		if !errors.Is(err, ErrConflict) || i >= commandTries {
			return v, err
		}
		if err := ctx.Err(); err != nil {
			return v, err
		}
	}
}
