package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview37ac_LongIntervalLiveLeaseTakenOver: README: a claimer
// "takes the store over once the lease stayed unchanged for three
// intervals and ten seconds". lease.ttl caps the interval read from the
// store at 24 h (against hostile bytes), but the executor accepts any
// --interval and renews its lease only once per interval between passes.
// An executor run with --interval 100h (a weekly-window site's choice;
// nothing refuses it) renews every 100 h; a second executor started
// next to it waits only 3×24 h + 10 s, sees no renewal (none is due
// yet), and takes the store of the live executor over. The live one is
// stopped at its next renewal. The claimer must be refused while the
// holder renews once per its interval (or the executor must refuse an
// interval longer than what claimers honour). Ground truth: the store's
// lease read back, on the test's clock.
func TestReview37ac_LongIntervalLiveLeaseTakenOver(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	e.errw = &bytes.Buffer{}
	const interval = 100 * time.Hour
	holder := lease{ID: newLeaseID(), Host: "machine-a", PID: 4242, State: "/shared/plans.db.fleet", StateID: "aaaa",
		Started: time.Now().UTC(), Interval: interval}
	stepClock(t, nil)
	require.NoError(t, claim(e.ctx, lockedStore{e}, holder, time.Now().UTC()))

	// The holder renews once per interval, as the executor's loop does
	// between passes (renew at each pass start, then time.After(interval)).
	nextRenew := interval
	var renewErr error
	stepClock(t, func(clock time.Duration) {
		for clock >= nextRenew && renewErr == nil {
			_, renewErr = claimLease(context.Background(), lockedStore{e}, holder, lease{}, nil, time.Now().UTC(), true)
			nextRenew += interval
		}
	})
	leaseTime.maxPoll = time.Hour // (only fewer reads: each read still sees every renewal)
	me := lease{ID: newLeaseID(), Host: "machine-b", PID: 4343, State: "/shared/plans.db.fleet", StateID: "aaaa",
		Started: time.Now().UTC(), Interval: 5 * time.Second}
	err := claim(e.ctx, lockedStore{e}, me, time.Now().UTC())
	require.NoError(t, renewErr)
	assert.Error(t, err, "a claimer took over a live executor's lease that is renewed every %s (its interval)", interval)
	assert.Equal(t, holder.ID, storedLease(t, e).ID, "the store's lease is no longer the live executor's: it stops at its next pass")
}
