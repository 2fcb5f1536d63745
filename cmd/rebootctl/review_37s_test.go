package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// review37sWorld is a bbolt store with one running plan p1 of n servers at
// concurrency n (every server may start in the first pass), the fake fleet
// and its clock.
func review37sWorld(t *testing.T, n int) (*env, *fake.Fleet, *fake.Clock) {
	t.Helper()
	return storeWorld(t, quickServers(n, "%03d"), plan.Count(n), "")
}

// TestReview37s_InvalidUUIDCommandWedgesStore: an operator's typo
// (`rebootctl plan stop 'p1 '`, or any argument that is not a valid plan
// UUID) is recorded in FILE.commands; applyCommands gets
// plan.ErrInvalidUUID from GetHead, which is none of the "refused for good"
// kinds, so it leaves the record unapplied and returns the error: from
// then on every open of the store fails, for good. The executor runs no
// pass of any plan, and a later, valid `plan stop p1` is never applied
// (every command fails) until someone hand-edits the file. The typo must be
// refused (recorded refused, or not recorded at all) and the store stay
// usable.
func TestReview37s_InvalidUUIDCommandWedgesStore(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 3)
	_, err := e.operatorCommand("stop", "p1 ") // a pasted trailing space
	require.Error(t, err, "an invalid plan UUID is an error for its command")

	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err = ex.Pass(e.ctx, "p1")
	assert.NoError(t, err, "the executor's pass of another plan failed: one operator's typo wedged the store")
	assert.NotEmpty(t, fleet.JobsCreated(), "the running plan p1 started nothing")

	v, err := e.operatorCommand("stop", "p1")
	assert.NoError(t, err, "a valid stop after the typo could not be applied")
	assert.Equal(t, plan.StateStopped, v.State)

	_, err = e.openStore()
	assert.NoError(t, err, "every later open of the store fails (show, report, create, the executor)")
}

// TestReview37s_SecondOperatorDropsFirstOutcome: two operators command
// the same plan. The first's stop is recorded and applied (by the
// executor's open of the store) while the first command still waits for
// the store to read its outcome; the second operator's command for the
// same plan, recorded meanwhile, drops the applied records of that plan
// (recordCommand), so the first operator is told its stop failed ("was
// recorded but is no longer in FILE.commands: another program rewrote that
// file", exit 1) although it landed and was applied. Its outcome must be
// kept for it to read.
func TestReview37s_SecondOperatorDropsFirstOutcome(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 3)
	ctx := e.ctx
	seq1, err := recordCommand(ctx, e.store, "p1", "stop", time.Now().UTC()) // operator 1
	require.NoError(t, err)
	// The executor opens the store before operator 1 does: it applies the stop.
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err = ex.Pass(ctx, "p1")
	require.NoError(t, err)
	assert.Empty(t, fleet.JobsCreated())
	// Operator 2 records a stop of the same plan (e.g. a second shell, or a
	// retry) before operator 1's process has read its outcome.
	_, err = recordCommand(ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)
	// Operator 1 now reads its outcome.
	v, err := e.commandOutcome("stop", "p1", seq1)
	assert.NoError(t, err, "operator 1's stop was applied, but it is told it failed")
	assert.Equal(t, plan.StateStopped, v.State)
}

// slowCreateFleet is the fake fleet whose CreateJob takes d (each call).
type slowCreateFleet struct {
	*fake.Fleet
	d       time.Duration
	mu      sync.Mutex
	created []time.Time
	first   chan struct{}
	once    sync.Once
}

func (f *slowCreateFleet) CreateJob(ctx context.Context, a plan.Action) error {
	f.once.Do(func() { close(f.first) })
	time.Sleep(f.d)
	err := f.Fleet.CreateJob(ctx, a)
	f.mu.Lock()
	f.created = append(f.created, time.Now())
	f.mu.Unlock()
	return err
}

// TestReview37s_JobsStartAfterStopLanded: the README says a stop recorded
// in FILE.commands "lands there in milliseconds ... and whoever opens the
// store next ... applies it first, so no reboot starts after a stop or
// cancel has landed". The executor's pass opens the store only before
// every 16 job creations (Executor.Pass, recheckEvery): a stop that landed
// (recordCommand returned) while the pass creates its first job is
// followed by 15 more job creations, each at any later time (here 20 ms
// apart; with slow BMCs a call may take up to its CallTimeout). Ground
// truth: the fleet's job creations timed after the stop returned.
func TestReview37s_JobsStartAfterStopLanded(t *testing.T) {
	e, fake0, clk := review37sWorld(t, 32)
	fleet := &slowCreateFleet{Fleet: fake0, d: 20 * time.Millisecond, first: make(chan struct{})}
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now, CallTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { _, err := ex.Pass(e.ctx, "p1"); done <- err }()
	<-fleet.first // the pass is creating its first job
	_, err := recordCommand(e.ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)
	landed := time.Now()
	require.NoError(t, <-done)
	var after atomic.Int64
	fleet.mu.Lock()
	for _, at := range fleet.created {
		if at.After(landed.Add(time.Millisecond)) {
			after.Add(1)
		}
	}
	fleet.mu.Unlock()
	// The first job, being created when the stop landed, is in flight; any
	// more is a reboot started after the stop had landed.
	assert.LessOrEqual(t, after.Load(), int64(1),
		"%d reboot job(s) were created after the stop had landed in FILE.commands", after.Load())
}

// TestReview37s_CancelReappliedAfterCrashReportsFailure: the applier
// (the executor, or another command) writes the cancel to the store
// (plan.CommandView, committed) and is killed before it records the
// outcome in FILE.commands (cmdfile.go applyCommands: the store's write,
// then the side file's). The next open applies the cancel again: the plan
// is canceled already, plan.Cancel refuses (ErrState), and that refusal
// is recorded as the command's outcome: the operator's `plan cancel` is
// told "plan p1 is canceled: it cannot be canceled" (exit 1) although its
// cancel is what canceled it. A command already in the store (the
// operator's own record, plan.Record) must not be reported refused.
func TestReview37s_CancelReappliedAfterCrashReportsFailure(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	ctx := e.ctx
	at := time.Now().UTC()
	seq, err := recordCommand(ctx, e.store, "p1", "cancel", at)
	require.NoError(t, err)
	// The applier's first step, then its crash: the store has the cancel,
	// the side file does not say so.
	bs, err := plan.OpenBolt(e.store)
	require.NoError(t, err)
	_, err = plan.CommandView(ctx, bs, "p1", plan.Record("cancel", at, plan.Cancel))
	require.NoError(t, err)
	require.NoError(t, bs.Close())
	// The operator's command reads its outcome.
	v, err := e.commandOutcome("cancel", "p1", seq)
	assert.NoError(t, err, "the operator's cancel, applied, is reported refused")
	assert.Equal(t, plan.StateCanceled, v.State)
}
