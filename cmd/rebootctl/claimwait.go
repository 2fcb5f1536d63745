package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"
)

// leaseClock is the clock a claim measures another executor's lease by:
// this process's monotonic time, never a time another machine wrote.
// Tests replace it (a fake clock, a short poll) to keep their claims
// fast.
type leaseClock struct {
	// now is this process's monotonic time.
	now func() time.Duration
	// sleep waits d, or until ctx ends (its error).
	sleep func(ctx context.Context, d time.Duration) error
	// poll is the first wait between two reads of a lease held by
	// another executor; each next one doubles, up to maxPoll.
	poll, maxPoll time.Duration
}

// processStart anchors leaseClock's monotonic time (time.Since reads the
// monotonic clock, which no clock step moves).
var processStart = time.Now()

// leaseTime is the clock of every claim.
var leaseTime = leaseClock{
	now:     func() time.Duration { return time.Since(processStart) },
	sleep:   sleepCtx,
	poll:    100 * time.Millisecond,
	maxPoll: time.Second,
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// claimWait is what a claim saw of another executor's lease, as the
// client-go leader election keeps it: the record it read (opaque: any
// change, a renewal's Seq or At, a new owner, is a renewal) and when, on
// this process's monotonic clock (leaseTime), it first read it. The
// lease lapses only once the record stayed unchanged for its ttl as this
// process measures it: no time another machine's clock wrote is compared
// with this one's.
type claimWait struct {
	me lease
	// renewing: me held the store already (claimLease).
	renewing bool

	seen   []byte        // the record first read; nil before
	seenAt time.Duration // when (leaseTime.now)
	ttl    time.Duration // the seen lease's
	poll   time.Duration // the next wait between reads
	told   bool          // the operator was told of the wait
}

// judge decides, on reading cur (raw, the record as stored), whether me
// may claim now (0, nil), must read again after the wait returned, or is
// refused (errOtherExecutor: another executor holds the store and
// renewed its lease while this one watched, or took it over from a
// renewing me).
func (w *claimWait) judge(cur lease, raw []byte) (time.Duration, error) {
	if cur.ID == w.me.ID || cur.free(w.me.Host, w.me.PIDNS) && !w.renewing {
		return 0, nil
	}
	if w.renewing {
		if cur.ID == "" {
			return 0, nil // no lease at all: nobody took it over
		}
		return 0, fmt.Errorf("%w (%s): it took this executor's lease over", errOtherExecutor, cur)
	}
	now := leaseTime.now()
	if w.seen == nil {
		w.seen, w.seenAt, w.ttl, w.poll = bytes.Clone(raw), now, cur.ttl(), leaseTime.poll
	} else if !bytes.Equal(raw, w.seen) {
		return 0, fmt.Errorf("%w (%s): it renewed its lease while this executor waited %s for it to lapse; stop it first "+
			"(an executor that stopped gives its lease up at once; one that died is taken over once its lease goes %s without a renewal)",
			errOtherExecutor, cur, (now - w.seenAt).Round(time.Millisecond), cur.ttl())
	}
	left := w.ttl - (now - w.seenAt)
	if left <= 0 {
		return 0, nil // unchanged for its ttl, as this process measured it: lapsed
	}
	return left, nil
}

// pause waits before the next read of cur, the lease held by another
// executor, left being the time until it lapses unrenewed: the poll
// interval (doubling up to leaseTime.maxPoll), at most left. The first
// pause tells the operator on errw (nil: nobody) whose lease it is and
// how long the claim waits.
func (w *claimWait) pause(ctx context.Context, errw io.Writer, cur lease, left time.Duration) error {
	if !w.told && errw != nil {
		w.told = true
		fmt.Fprintf(errw, "rebootctl: another executor holds this plan store's lease (on %s, pid %d): waiting up to %s for a renewal; "+
			"if it renews none, it is taken to be dead and its lease is taken over\n", clean(cur.Host), cur.PID, left.Round(time.Millisecond))
	}
	d := min(w.poll, left)
	w.poll = min(2*w.poll, leaseTime.maxPoll)
	return leaseTime.sleep(ctx, d)
}
