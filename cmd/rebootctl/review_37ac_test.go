package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
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

// TestReview37ac_ReusedPIDMakesDeadLeaseWaitTTL: README: "a lease ... of
// a process of the same PID namespace of the same boot that no longer
// runs, is taken at once". lease.free judges that process only by its
// PID (processRuns): once the dead executor's PID was given to another
// program (a PID reused after a crash: another process started since,
// long after the lease's Started), the executor restarted on the same
// machine, in the same namespace, waits the whole ttl (three intervals
// and ten seconds) for a process that no longer runs. The lease records
// when its executor started (Started); the PID's process started after
// it (/proc/PID/stat's start time), so it is not the lease's process.
// Ground truth: the test's clock at the claim.
func TestReview37ac_ReusedPIDMakesDeadLeaseWaitTTL(t *testing.T) {
	ns := pidNamespace()
	if ns == "" {
		t.Skip("no PID namespace to judge by here")
	}
	e, _, _ := review37sWorld(t, 1)
	e.errw = &bytes.Buffer{}
	host, _ := os.Hostname()
	// The dead executor's PID, now another program's, started an hour
	// after that executor.
	other := exec.Command("sleep", "60")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _, _ = other.Process.Wait() })
	// Setup changed by the fix (t37d): a lease now records its process's
	// start in clock ticks after boot (PIDStart), which no wall-clock step
	// moves; Started, the executor's wall clock, is not compared with the
	// process's start (a clock stepped since the lease was written would
	// take a live executor's lease at once). The dead executor's start:
	// a tick before the program now at its PID.
	ticks, err := strconv.ParseUint(pidStartTicks(other.Process.Pid), 10, 64)
	require.NoError(t, err)
	dead := lease{ID: newLeaseID(), Host: host, PID: other.Process.Pid, PIDNS: ns, PIDStart: strconv.FormatUint(ticks-1, 10), State: e.store + ".fleet", StateID: "aaaa",
		Started: time.Now().Add(-time.Hour).UTC(), Interval: 5 * time.Second}
	stepClock(t, nil)
	require.NoError(t, claim(e.ctx, lockedStore{e}, dead, time.Now().Add(-50*time.Minute).UTC()))

	clock := stepClock(t, nil)
	me := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: e.store + ".fleet", StateID: "aaaa", Started: time.Now().UTC(), Interval: 5 * time.Second}
	require.NoError(t, claim(e.ctx, lockedStore{e}, me, time.Now().UTC()))
	assert.Zero(t, *clock, "the lease of a process that no longer runs (its PID now another program's, started after it) was taken only after waiting %s", *clock)
}
