package redfish_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlowDoubtfulSystemOutranksDeadNeighbour (issue 35, readplace.go:
// "a system in doubt that answers is first among the systems in doubt
// after a bounded number of its dead neighbours' reads, and then
// answered if its caller waits for its answer"). Blade 1 is healthy but
// slow (800 ms a read) and in doubt (one check gave up on it at 400
// ms); blade 2 was answered after that, then died, and is polled with 2
// s deadlines; blades 3 and 4 answer at once and are polled every 20 ms
// (MaxInFlight 2). Blade 2, answered later, ranks above blade 1 while
// they missed as many reads, and may cut blade 1's read in the extra
// place; but each of blade 2's reads is missed and a cut read is not, so
// blade 1 soon ranks first and keeps the extra place until its answer.
// Ground truth: blade 1's reads answered (the BMC answers each in 800
// ms), polled with 3 s deadlines.
func TestSlowDoubtfulSystemOutranksDeadNeighbour(t *testing.T) {
	const n, max = 4, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	ctx := context.Background()
	for _, c := range cs { // a usual answer time of a few ms
		_, err := c.State(ctx)
		require.NoError(t, err)
	}
	e.set("1", 800*time.Millisecond, false) // blade 1: healthy, slow
	_, err := cs[0].State(ctx)
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond) // one short check gives up
	_, _ = cs[0].State(rctx)
	cancel()
	_, doubt := cs[0].Marks35aa()
	require.True(t, doubt, "blade 1 is doubtful after the check that gave up")
	_, err = cs[1].State(ctx) // blade 2 answered after blade 1 fell in doubt
	require.NoError(t, err)
	e.set("2", 0, true) // and dies

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				deadline := 2 * time.Second // blade 2, dead
				if i > 0 {                  // blades 3 and 4: fast, polled every 20 ms
					time.Sleep(20 * time.Millisecond)
					deadline = 5 * time.Second
				}
				rctx, cancel := context.WithTimeout(ctx, deadline)
				_, _ = c.State(rctx)
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	start := time.Now()
	var first time.Duration
	for time.Since(start) < 15*time.Second {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cs[0].State(rctx)
		cancel()
		t.Logf("blade 1's read (3 s deadline), %v in: %v", time.Since(start).Round(time.Millisecond), err)
		if err == nil {
			first = time.Since(start)
			break
		}
	}
	require.NotZero(t, first, "slow blade 1, in doubt, never answered in 15 s of reads with 3 s deadlines beside a dead neighbour answered later")
	var fails int
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := cs[0].State(rctx); err != nil {
			fails++
		}
		cancel()
	}
	assert.Zero(t, fails, "slow blade 1's reads after its answer failed (of 3)")
}
