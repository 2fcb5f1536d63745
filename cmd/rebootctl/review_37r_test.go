//go:build e2e

package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// stopDuringPut is the executor's store (lockedStore) that, at one
// PutView, starts the operator's stop (plan stop: recordCommand, then its
// outcome) as soon as the executor holds the bbolt file for that write
// (seen from outside: flock of the file busy), and reports how long the
// stop took to land (be recorded durably: from then on no reboot starts)
// and how long the command took to report its outcome.
type stopDuringPut struct {
	lockedStore
	arm      *bool
	landed   chan time.Duration
	reported chan stopReport
	held     *time.Duration
}

// stopReport is plan stop's outcome, and when it came.
type stopReport struct {
	took time.Duration
	v    plan.View
	err  error
}

func (s stopDuringPut) PutView(ctx context.Context, v plan.View) error {
	if !*s.arm {
		return s.lockedStore.PutView(ctx, v)
	}
	*s.arm = false
	go func() {
		f, err := os.Open(s.e.store)
		if err != nil {
			s.landed <- -1
			return
		}
		defer f.Close()
		for { // wait until the executor holds the file
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
			if errors.Is(err, syscall.EWOULDBLOCK) {
				break
			}
			if err == nil {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			}
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		seq, err := recordCommand(context.Background(), s.e.store, "big", "stop", start.UTC())
		if err != nil {
			s.landed <- -1
			return
		}
		s.landed <- time.Since(start)
		op := &env{ctx: context.Background(), store: s.e.store}
		v, err := op.commandOutcome("stop", "big", seq)
		s.reported <- stopReport{time.Since(start), v, err}
	}()
	start := time.Now()
	err := s.lockedStore.PutView(ctx, v)
	*s.held = time.Since(start)
	return err
}

// TestReview37r_StopWaitsForLargeWrite (issue 37 point 1, the bbolt
// store, review round 16): README: "a stop or cancel lands within a store
// operation or so ... at 50 % of 100,000 servers a stop lands in well
// under a second with the executor running"; the issue asks for 1 s. A
// store operation of the executor is not bounded in time: the reads are
// (BoltMaxStartsPerPass), but a pass's write (BoltStore.PutView) rewrites,
// under the file's lock, every reboot record of the view that changed,
// and with 50,000 reboots in flight a pass after the executor was away
// for a minute (its headnode rebooted, it was restarted, one long pass)
// changes all of them. The stop the operator issues while that write holds
// the file waits for all of it. Ground truth: the stop's wall time from
// the moment the executor holds the file (flock seen busy from outside).
//
// Fixed by recording the stop next to the store (cmdfile.go: plan stop's
// first step, which needs no lock of the store): the stop lands when that
// record is durable, and the executor applies it before its next read or
// write of the store, so nothing starts after it. The test was changed
// accordingly (by the fix's author): the landing is timed on the record
// (plan stop's recordCommand, not a header Command through the store);
// the command's report (commandOutcome, which still waits for the store)
// is checked for its outcome, and ground truth that nothing started: the
// fleet's job creations in a pass after the stop, when every job in
// flight had ended and the plan would start the next ones.
func TestReview37r_StopWaitsForLargeWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 servers")
	}
	skipLatencyUnderRace(t)
	const n, percent = 100_000, 50
	flying := n * percent / 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk, fleet, path := bigStore(t, ctx, n, plan.Percent(percent), flying)
	e := &env{ctx: ctx, store: path}
	arm := false
	var held time.Duration
	st := stopDuringPut{lockedStore{e}, &arm, make(chan time.Duration, 1), make(chan stopReport, 1), &held}
	ex := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	_, err := ex.Pass(ctx, "big") // the executor's first pass
	require.NoError(t, err)
	// The executor was away for a minute: every job in flight moved on.
	clk.Advance(time.Minute)
	arm = true
	_, err = ex.Pass(ctx, "big")
	if !errors.Is(err, plan.ErrConflict) { // the stop may be applied (by the executor, at its open of the store) before the write: then the write loses its compare-and-swap
		require.NoError(t, err)
	}
	require.False(t, arm, "the pass wrote nothing")
	var took time.Duration
	select {
	case took = <-st.landed:
	case <-time.After(30 * time.Second):
		t.Fatal("the stop never landed")
	}
	require.GreaterOrEqual(t, took, time.Duration(0), "the stop failed")
	var rep stopReport
	select {
	case rep = <-st.reported:
	case <-time.After(60 * time.Second):
		t.Fatal("plan stop never reported")
	}
	require.NoError(t, rep.err)
	require.Equal(t, plan.StateStopped, rep.v.State, "plan stop's report")
	// Every job in flight has ended: a running plan would start the next
	// reboots in this pass. The stop, recorded, keeps them from starting.
	created := len(fleet.JobsCreated())
	clk.Advance(10 * time.Minute)
	_, err = ex.Pass(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, created, len(fleet.JobsCreated()), "jobs created after the stop landed (ground truth: the fleet)")
	bs, err := plan.OpenBolt(path)
	require.NoError(t, err)
	h, err := bs.GetHead(context.Background(), "big")
	require.NoError(t, err)
	require.NoError(t, bs.Close())
	require.Equal(t, plan.StateStopped, h.State)
	t.Logf("the executor's PutView took %s (encoding, then the write under the lock); the stop landed after %s, plan stop reported after %s (%d in flight)",
		held, took, rep.took, len(rep.v.Index.InFlight))
	assert.Less(t, took, time.Second, "a stop took %s to land on a 100,000-server plan (%d in flight): it waited for the executor's write of the changed records", took, flying)
}
