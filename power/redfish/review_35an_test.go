package redfish_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// review35anStarve polls blades 2..n (dead: their reads hang until the
// caller gives up) with deadDeadline each, continuously, and then reads
// healthy blade 1 six times with checkDeadline; it returns how many of
// blade 1's reads failed.
func review35anStarve(t *testing.T, e *review35wBMC, cs []*redfish.Controller, deadDeadline, checkDeadline time.Duration) int {
	t.Helper()
	ctx := context.Background()
	for i := 2; i <= len(cs); i++ {
		e.set(itoa35w(i), 0, true)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, deadDeadline)
				_, _ = c.State(rctx)
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(3 * deadDeadline) // every dead blade's read ended unanswered, more than once
	var fails int
	for range 6 {
		st := time.Now()
		rctx, cancel := context.WithTimeout(ctx, checkDeadline)
		_, err := cs[0].State(rctx)
		cancel()
		t.Logf("blade 1's read (%v): %v; system reads in flight at the BMC %d", time.Since(st).Round(time.Millisecond), err, e.inFlight.Load())
		if err != nil {
			fails++
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fails
}

// TestReview35_DeadBladesNeverSuspectOnUsualSlowBMC (review round 24,
// issue 35; round 23's change "suspicion decided when a read ends,
// unanswered for 2 overdue times"): the BMC answers a system read in
// 150 ms (a usual Redfish answer time; no answer is late), so the
// overdue time is 600 ms and a read must stay unanswered 1.2 s to make
// its system suspect. The monitor polls with a 1 s deadline: the reads
// of the seven dead blades end unanswered after 1 s, never 1.2 s, so no
// dead blade ever becomes suspect, and each of their reads holds one of
// the session's MaxInFlight (2) places for 600 ms of every second. The
// healthy blade 1 (150 ms reads) queues behind them (its reads take 0.8
// to 1 s instead of 150 ms) and its 700 ms checks fail: dead blades hold
// the places of a healthy blade's reads, what Config.MaxInFlight says
// never happens ("dead blades never hold the places of healthy blades'
// reads"). Before round 23 the overdue timer made the system suspect at
// 600 ms (with f288b0e^1's readplace.go this test passes: 150-210 ms).
func TestReview35_DeadBladesNeverSuspectOnUsualSlowBMC(t *testing.T) {
	const n, max = 8, 2
	e := newReview35wBMC(t, n)
	for i := 1; i <= n; i++ {
		e.set(itoa35w(i), 150*time.Millisecond, false)
	}
	cs := e.connect35w(t, n, max)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, c := range cs { // the session's usual answer time: 150 ms
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				_, err := c.State(ctx)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	fails := review35anStarve(t, e, cs, time.Second, 700*time.Millisecond)
	assert.Zero(t, fails, "healthy blade 1's 700 ms reads (150 ms at the BMC) failed (of 6) while dead neighbours were polled with 1 s deadlines")
}

// TestReview35_LateAnswerKeepsDeadBladesOffSuspect (review round 24,
// issue 35; round 23's "a late answer raises the overdue time at once"
// together with "suspect only after 2 overdue times"): the BMC answers
// in milliseconds; one read of healthy blade 1 takes 1.1 s (a slow
// moment). That one late answer raises the overdue time to 2 s, so a read
// must now stay unanswered 4 s to make its system suspect. Seven blades
// then die and are polled with 2 s deadlines (the 35w monitor's): their
// reads end unanswered at 2 s, never suspect, and each holds a read place
// for its whole life. Blade 1 answers in milliseconds, yet its 500 ms
// checks wait behind the dead reads and fail; nothing answers on the
// session, so the raised overdue time never decays.
func TestReview35_LateAnswerKeepsDeadBladesOffSuspect(t *testing.T) {
	const n, max = 8, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	ctx := context.Background()
	for range 3 {
		_, err := cs[0].State(ctx)
		require.NoError(t, err)
	}
	e.set("1", 1100*time.Millisecond, false)
	_, err := cs[0].State(ctx) // one late answer
	require.NoError(t, err)
	e.set("1", 0, false) // fast again, for good
	fails := review35anStarve(t, e, cs, 2*time.Second, 500*time.Millisecond)
	assert.Zero(t, fails, "healthy blade 1's 500 ms reads failed (of 6) while dead neighbours were polled, after one late answer of its own")
}
