//go:build e2e

package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// timedLocked is the executor's store (lockedStore), recording its
// longest GetView (the bbolt file is locked for all of it) and how many
// reboots that view loaded.
type timedLocked struct {
	lockedStore
	mu      *sync.Mutex
	longest *time.Duration
	loaded  *int
}

func (s timedLocked) GetView(ctx context.Context, uuid string) (plan.View, error) {
	start := time.Now()
	v, err := s.lockedStore.GetView(ctx, uuid)
	took := time.Since(start)
	s.mu.Lock()
	if took > *s.longest {
		*s.longest, *s.loaded = took, len(v.Reboots)
	}
	s.mu.Unlock()
	return v, err
}

// TestReview37p_StopWaitsForLargeView (issue 37 point 1, the bbolt store,
// review round 14): "an operator's stop or cancel lands within a store
// operation or so" (README), and the issue asks for 1 s at 100,000
// servers with the executor running. But a store operation of the
// executor is not bounded: at 50 % of 100,000 servers (50,000 in flight)
// the bbolt view is the reboots in flight and the next PendingInView =
// concurrency + 1 = 50,001 pending ones, i.e. the whole plan, and each
// pass's GetView through lockedStore holds the file's lock while it
// decodes all 100,000 records (2-4 s here). The operator's command, even
// let go first (FILE.wait), waits for the operation under way. Ground
// truth: each command's wall time, and the plan read back with the last
// command's state.
//
// Since review round 16 (TestReview37r_StopWaitsForLargeWrite) the
// commands are given as rebootctl gives them: recorded next to the store
// (cmdfile.go), where they land without waiting for the executor's store
// operation; the landing is timed on that record, and each command's
// report (which still waits for the store) is checked for its outcome.
func TestReview37p_StopWaitsForLargeView(t *testing.T) {
	stopLandsWhileExecutorRuns(t, 50)
}

// TestStopLandsAtFivePercent is TestReview37p_StopWaitsForLargeView at 5 %
// of 100,000 servers (5,000 in flight): the issue asks for both.
func TestStopLandsAtFivePercent(t *testing.T) {
	stopLandsWhileExecutorRuns(t, 5)
}

// stopLandsWhileExecutorRuns runs the executor's passes on a
// 100,000-server bbolt plan at percent concurrency with that many in
// flight, and checks that an operator's stop or resume lands within 1 s.
func stopLandsWhileExecutorRuns(t *testing.T, percent int) {
	if testing.Short() {
		t.Skip("100,000 servers")
	}
	skipLatencyUnderRace(t)
	const n = 100_000
	flying := n * percent / 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk, fleet, path := bigStore(t, ctx, n, plan.Percent(percent), flying)
	e := &env{ctx: ctx, store: path}
	var longest time.Duration
	var loaded int
	ex := &plan.Executor{Fleet: fleet, Store: timedLocked{lockedStore{e}, &sync.Mutex{}, &longest, &loaded}, Now: clk.Now}
	done := make(chan struct{})
	passes := 0
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = ex.Pass(ctx, "big")
			passes++
			clk.Advance(5 * time.Second)
		}
	}()
	time.Sleep(3 * time.Second)
	var worst time.Duration
	// plan stop and plan run as rebootctl gives them (operatorCommand):
	// the command lands when it is recorded next to the store
	// (recordCommand); its report (commandOutcome) waits for the store.
	op := &env{ctx: ctx, store: path}
	cmds := []string{"stop", "run", "stop", "run", "stop", "run", "stop"}
	for k, cmd := range cmds {
		time.Sleep(time.Duration(300+97*k) * time.Millisecond)
		start := time.Now()
		seq, err := recordCommand(ctx, path, "big", cmd, start.UTC())
		took := time.Since(start)
		require.NoError(t, err)
		v, err := op.commandOutcome(cmd, "big", seq)
		require.NoError(t, err, "%s's outcome", cmd)
		require.Equal(t, map[string]plan.State{"stop": plan.StateStopped, "run": plan.StateRunning}[cmd], v.State, "the plan after %s", cmd)
		worst = max(worst, took)
		t.Logf("command %d (%s) landed after %s, reported after %s", k, cmd, took, time.Since(start))
	}
	cancel()
	<-done
	bs, err := plan.OpenBolt(path)
	require.NoError(t, err)
	h, err := bs.GetHead(context.Background(), "big")
	require.NoError(t, err)
	require.NoError(t, bs.Close())
	require.Equal(t, plan.StateStopped, h.State)
	t.Logf("%d executor passes ran; the slowest command landed after %s; the executor's longest GetView took %s (%d reboots loaded)", passes, worst, longest, loaded)
	assert.Less(t, worst, time.Second, "a stop or resume took %s to land on a 100,000-server plan (%d in flight) while the executor ran (its longest GetView: %s, %d reboots)", worst, flying, longest, loaded)
}
