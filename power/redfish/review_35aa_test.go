package redfish_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35aa_SlowDoubtfulSystemCutForever (review round 26, issue 35;
// readplace.go: "A waiting read cuts (cancels the request of) a read of
// a doubtful ... system in one of those places if it ranks higher and
// its own system was answered since the other became doubtful"; a system
// is doubtful "until one of its reads is answered"). Blade 1 is healthy
// but slow: every read of it takes 800 ms at the BMC, and it was
// answered so (its own answer time, 800 ms: no evidence cuts it). One
// check of it gives up at 400 ms (a short status deadline, or one slow
// moment past a monitor's deadline): 400 ms at the BMC is past twice
// the usual answer time (200 ms floor), so blade 1 is doubtful. From
// then on, while its fast neighbours (blades 2..4, answered in ms,
// polled every 20 ms) keep the MaxInFlight (2) places busy, each of
// blade 1's reads is cut as soon as a neighbour's read waits, long
// before its 800 ms, sent again, cut again: no read of blade 1 is ever
// answered, so it stays doubtful and is cut for ever, though every read
// of it would be answered in 800 ms and its callers wait 3 s. Ground
// truth: blade 1's reads end without the BMC's answer. Control
// (Q35AACTL=1): without the one short check, the same reads are
// answered.
func TestReview35aa_SlowDoubtfulSystemCutForever(t *testing.T) {
	const n, max = 4, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	ctx := context.Background()
	for _, c := range cs { // a usual answer time of a few ms
		_, err := c.State(ctx)
		require.NoError(t, err)
	}
	e.set("1", 800*time.Millisecond, false) // blade 1: healthy, slow
	_, err := cs[0].State(ctx)              // answered in 800 ms: its own answer time
	require.NoError(t, err)
	if os.Getenv("Q35AACTL") == "" {
		rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond) // one short check gives up
		_, _ = cs[0].State(rctx)
		cancel()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs[1:] { // fast neighbours, polled
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = c.State(rctx)
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	var fails int
	for range 3 {
		st := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cs[0].State(rctx)
		cancel()
		t.Logf("blade 1's read (800 ms at the BMC, 3 s deadline) after %v: %v", time.Since(st).Round(time.Millisecond), err)
		if err != nil {
			fails++
		}
	}
	assert.Zero(t, fails, "healthy blade 1's reads (800 ms at the BMC) failed (of 3) with 3 s deadlines while fast neighbours were polled")
}
