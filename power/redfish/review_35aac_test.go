package redfish_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35aa_HealthyBladeSuspectByEvidenceQueuesBehindDeadBlades
// (review round 27, issue 35; readplace.go: "A healthy blade whose
// caller gave up on one slow read waits for no doubtful or suspect dead
// blade"). The chassis of TestReview35_HealthyBladeSuspectAfterOneMissedCheck
// (blades 2..8 dead, polled with 2 s deadlines; blade 1 healthy, checked
// with 500 ms deadlines), with one more healthy blade beside it (blade
// 9, polled every 20 ms, answered in ms) and MaxInFlight 2. One of blade
// 1's reads takes 600 ms (a slow moment) and its check gives up at 500
// ms: blade 9's reads answered meanwhile are evidence, so blade 1's read
// is cut at 200 ms and blade 1 is made suspect (not merely doubtful, as
// in the round-24 test without a fast neighbour). Blade 1 answers in
// milliseconds again at once, but every later read of it queues for the
// one extra place the suspect systems share, at the back, behind the
// dead blades' reads that hold it until their 2 s deadlines (no probe is
// wanted: blade 9's reads keep the MaxInFlight places moving, so the
// extra place is never cut): its 500 ms checks give up before they reach
// the place (seconds of them after each slow moment), while the
// MaxInFlight places serve blade 9 in milliseconds.
// Ground truth: blade 1 is fast (the BMC answers its reads at once) and
// the MaxInFlight places are free most of the time (blade 9's reads).
func TestReview35aa_HealthyBladeSuspectByEvidenceQueuesBehindDeadBlades(t *testing.T) {
	const n = 9 // blade 1 and 9 healthy, blades 2..8 dead
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, 2)
	ctx := context.Background()
	for range 3 { // a usual answer time of a few ms
		_, err := cs[0].State(ctx)
		require.NoError(t, err)
	}
	for i := 2; i < n; i++ {
		e.set(itoa35w(i), 0, true)
	}
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
				if i == n-2 { // blade 9: fast, polled every 20 ms
					time.Sleep(20 * time.Millisecond)
				}
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, _ = c.State(rctx)
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(5 * time.Second) // the dead blades are suspect
	var fails, suspect int
	for range 6 {
		e.set("1", 600*time.Millisecond, false)
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond) // the check gives up on one slow read
		_, _ = cs[0].State(rctx)
		cancel()
		e.set("1", 0, false) // blade 1 is fast again
		if sus, _ := cs[0].Marks35aa(); sus {
			suspect++
		}
		for range 2 {
			st := time.Now()
			rctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := cs[0].State(rctx)
			cancel()
			t.Logf("blade 1's check after a slow read (%v): %v", time.Since(st).Round(time.Millisecond), err)
			if err != nil {
				fails++
			}
		}
	}
	t.Logf("blade 1 suspect after %d of its 6 slow reads", suspect)
	assert.Zero(t, fails, "healthy blade 1's 500 ms checks failed (of 12), 2 after each of 6 slow reads, while its dead neighbours and a fast one were polled")
}
