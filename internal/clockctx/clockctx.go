// Package clockctx bounds a context by the clock as well as by its
// deadline's timer (reboot.ClockBound is its public face): past the
// deadline, Err returns context.DeadlineExceeded although the timer has
// not fired yet, as after a process pause. Code that derives a context
// from a Guard's (context.WithTimeout) and hands it on to a store or an
// adapter bounds the derived one too, since a derived context checks its
// parent only when the parent's Done closes.
package clockctx

import (
	"context"
	"time"
)

// Bound returns ctx with an Err that also compares the clock (time.Now,
// monotonic) with ctx's deadline. A ctx without a deadline, or one
// already bound, is returned as it is.
func Bound(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	if _, ok := ctx.(bound); ok {
		return ctx
	}
	return bound{ctx}
}

type bound struct{ context.Context }

func (c bound) Err() error { return Err(c.Context) }

// Err is ctx's error, or context.DeadlineExceeded once the clock
// (time.Now, monotonic) is past ctx's deadline although its timer has
// not fired yet: the Err of a bound context, for a type that embeds ctx
// with its own Err (power's call state).
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
