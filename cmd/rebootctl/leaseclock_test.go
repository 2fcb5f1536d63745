package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// virtualLease is the test clock of claims: a claim that waits for
// another executor's lease to lapse (claimWait) sleeps a millisecond of
// real time per read and moves the clock by the whole wait, so that a
// test that takes the store over from a dead executor's lease (made by
// claiming it, as that executor did) stays fast. The clock still runs
// with real time between waits.
var virtualLease atomic.Int64 // the time the waits added

func init() {
	leaseTime = virtualLeaseClock()
}

// virtualLeaseClock is leaseTime for tests (virtualLease).
func virtualLeaseClock() leaseClock {
	real := leaseTime
	return leaseClock{
		now: func() time.Duration { return real.now() + time.Duration(virtualLease.Load()) },
		sleep: func(ctx context.Context, d time.Duration) error {
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return err
			}
			virtualLease.Add(int64(d))
			return nil
		},
		poll:    real.poll,
		maxPoll: real.maxPoll,
	}
}

// realLeaseClock makes claims wait in real time (this process's
// monotonic clock) until the test ends: for a test whose other executor
// renews its lease in real time while a claim waits.
func realLeaseClock(t *testing.T) {
	t.Helper()
	prev := leaseTime
	leaseTime = leaseClock{
		now:     func() time.Duration { return time.Since(processStart) },
		sleep:   sleepCtx,
		poll:    100 * time.Millisecond,
		maxPoll: time.Second,
	}
	t.Cleanup(func() { leaseTime = prev })
}

// renewing keeps l's claim on e's store renewed every period, in real
// time, its At written by a clock offset from this one, until the test
// ends, as l's live executor does; claims wait in real time meanwhile
// (realLeaseClock). It renews through an env of its own.
func renewing(t *testing.T, e *env, l lease, period, offset time.Duration) {
	t.Helper()
	realLeaseClock(t)
	ctx, cancel := context.WithCancel(context.Background())
	own := &env{ctx: ctx, store: e.store, errw: io.Discard}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := claim(ctx, lockedStore{own}, l, time.Now().Add(offset).UTC()); err != nil && ctx.Err() == nil {
					t.Errorf("the live executor's renewal: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}
