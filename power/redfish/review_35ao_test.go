package redfish_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_CachedSystemFreesSlowBMCReads (review round 25, issue
// 35; readplace.go: "A BMC that is merely slow answers no read that much
// faster than the reads sent before it, so its reads keep their places:
// the BMC is sent no more than MaxInFlight + 1 reads at once";
// Config.MaxInFlight: "a merely slow BMC ... is sent at most MaxInFlight
// + 1 reads at once"). A BMC that is merely slow, and slow per system:
// it answers system 1 from its cache in milliseconds and every other
// system's read in 3 s (it asks each blade's controller), every read
// answered, none hangs (the monitor's deadlines are 10 s). System 1's
// quick answers are taken as evidence that the slow systems hang: each
// slow read is freed from its place (its system marked suspect) while
// the BMC still works on it, and another system's slow read takes the
// place, so the BMC works on about one
// read per system at once (12 here, MaxInFlight 2), growing with the
// number of blades, not bounded by MaxInFlight. Ground truth: the
// server's own count of system reads in flight (peak).
func TestReview35_CachedSystemFreesSlowBMCReads(t *testing.T) {
	const n, max = 12, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	ctx := context.Background()
	for range 3 {
		_, err := cs[0].State(ctx)
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int32
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if _, err := c.State(rctx); err != nil {
					errs.Add(1) // queueing: 11 systems of 3 s reads on MaxInFlight 2 (not asserted)
				}
				cancel()
				if c == cs[0] {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // all polled, all fast
	for i := 2; i <= n; i++ {          // the BMC now asks blades 2..n's controllers: 3 s a read
		e.set(itoa35w(i), 3*time.Second, false)
	}
	time.Sleep(200 * time.Millisecond) // the fast reads in flight returned
	e.peak.Store(0)
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("the BMC's peak of system reads in flight: %d (MaxInFlight %d); reads that failed: %d", e.peak.Load(), max, errs.Load())
	assert.LessOrEqual(t, int(e.peak.Load()), max+1, "system reads a merely slow BMC (every read answered in 3 s, one system from cache) was sent at once")
}

// TestReview35_DeadBladesHoldPlacesUnderFourUsualAnswers (review round
// 25, issue 35; round 24's fix of
// TestReview35_DeadBladesNeverSuspectOnUsualSlowBMC: "a read unanswered
// for the usual overdue time makes its system doubtful", and suspicion
// by evidence only once a read is "four times as long [unanswered as the
// evidence took] and its usual overdue time"). The same chassis with a
// usual answer time of 600 ms (every blade's read takes 600 ms, an
// ordinary iDRAC-class figure): the usual overdue time is 4 x 600 ms =
// 2.4 s. The monitor polls the dead blades 2..5 with 1.5 s deadlines
// (2.5 answer times): their reads end unanswered at 1.5 s, never
// doubtful, and no evidence ever shows they hang (a read must be 2.4 s
// old for that), so they keep the MaxInFlight (2) places for their whole
// lives, for ever. Healthy blade 1 (600 ms reads) fails its 1.2 s checks
// (twice its answer time), queued behind dead reads: round 24 moved the
// threshold from twice the overdue time to once, so any monitor
// deadline under four usual answer times still lets dead blades hold
// healthy blades' places ("dead blades never hold the places of healthy
// blades' reads", Config.MaxInFlight).
func TestReview35_DeadBladesHoldPlacesUnderFourUsualAnswers(t *testing.T) {
	const n, max = 5, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	for i := 1; i <= n; i++ {
		e.set(itoa35w(i), 600*time.Millisecond, false)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, c := range cs { // the session's usual answer time: 600 ms
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				_, err := c.State(ctx)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	fails := review35anStarve(t, e, cs, 1500*time.Millisecond, 1200*time.Millisecond)
	assert.Zero(t, fails, "healthy blade 1's 1.2 s reads (600 ms at the BMC) failed (of 6) while dead neighbours were polled with 1.5 s deadlines")
}
