package reboot_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// runFor starts r and returns a stop function that cancels it and waits
// for Run to return (its error).
func runFor(t *testing.T, r *reboot.Runner) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() { out <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-out:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestRunnerSerialisesKeys (issue 40, point 2): keys woken many times from
// many goroutines are never reconciled twice at once, at most Workers
// passes run at once, and every wake-up is followed by a pass that saw it
// (a key woken while its pass runs runs again).
func TestRunnerSerialisesKeys(t *testing.T) {
	const keys, workers = 8, 3
	var mu sync.Mutex
	active, maxPer := map[string]int{}, map[string]int{}
	total, maxTotal := 0, 0
	woken, seen := map[string]int{}, map[string]int{}
	loop := reboot.Loop{Name: "l", Reconcile: func(ctx context.Context, k string) (reboot.Next, error) {
		mu.Lock()
		active[k]++
		maxPer[k] = max(maxPer[k], active[k])
		total++
		maxTotal = max(maxTotal, total)
		seen[k] = woken[k]
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		active[k]--
		total--
		mu.Unlock()
		return reboot.Next{}, nil
	}}
	r := &reboot.Runner{Loops: []reboot.Loop{loop}, Workers: workers}
	stop := runFor(t, r)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := fmt.Sprintf("k%d", (i+g)%keys)
				mu.Lock()
				woken[k]++
				mu.Unlock()
				require.NoError(t, r.Add("l", k))
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range woken {
			if seen[k] != n {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "a wake-up was not followed by a pass")
	require.ErrorIs(t, stop(), context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	for k, n := range maxPer {
		assert.Equal(t, 1, n, "key %s reconciled twice at once", k)
	}
	assert.LessOrEqual(t, maxTotal, workers)
	assert.Error(t, r.Add("nope", "k"))
}

// TestRunnerBacksOff (issue 40, point 2): a pass that keeps failing (or
// asks to Requeue) is retried after a back-off doubling from MinBackoff to
// MaxBackoff, not in a hot loop; a pass that succeeds resets it. The gaps
// are checked from below only (load makes them longer, never shorter).
func TestRunnerBacksOff(t *testing.T) {
	for _, requeue := range []bool{false, true} {
		t.Run(fmt.Sprintf("requeue=%v", requeue), func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Time
			loop := reboot.Loop{Name: "l", Reconcile: func(context.Context, string) (reboot.Next, error) {
				mu.Lock()
				at = append(at, time.Now())
				mu.Unlock()
				if requeue {
					return reboot.Next{Requeue: true}, nil
				}
				return reboot.Next{}, reboot.ErrConflict
			}}
			const lo, hi = 20 * time.Millisecond, 80 * time.Millisecond
			r := &reboot.Runner{Loops: []reboot.Loop{loop}, MinBackoff: lo, MaxBackoff: hi}
			stop := runFor(t, r)
			require.NoError(t, r.Add("l", "k"))
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(at) >= 6 }, 20*time.Second, 5*time.Millisecond)
			require.ErrorIs(t, stop(), context.Canceled)
			mu.Lock()
			defer mu.Unlock()
			want := lo
			for i := 1; i < 6; i++ {
				gap := at[i].Sub(at[i-1])
				assert.GreaterOrEqual(t, gap, want-2*time.Millisecond, "retry %d after %v", i, gap)
				want = min(2*want, hi)
			}
		})
	}
}

// TestRunnerRequeueAfterAndWake (issue 40, point 2): Next.After schedules
// the next pass (a pass asking for an hour is not run again soon), and a
// wake-up brings it forward; a pass with neither runs again only when
// woken.
func TestRunnerRequeueAfterAndWake(t *testing.T) {
	var calls atomic.Int32
	wakes := make(chan struct{}, 1)
	loop := reboot.Loop{Name: "l",
		Keys: func(context.Context) ([]string, error) { return []string{"k"}, nil },
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			ch := make(chan struct{})
			go func() {
				defer close(ch)
				for {
					select {
					case <-ctx.Done():
						return
					case <-wakes:
						ch <- struct{}{}
					}
				}
			}()
			return ch, nil
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			calls.Add(1)
			return reboot.Next{After: time.Hour}, nil
		}}
	r := &reboot.Runner{Loops: []reboot.Loop{loop}}
	runFor(t, r)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 20*time.Second, 5*time.Millisecond, "the listed key was reconciled")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, int32(1), calls.Load(), "RequeueAfter of an hour ran again at once")
	wakes <- struct{}{}
	require.Eventually(t, func() bool { return calls.Load() == 2 }, 20*time.Second, 5*time.Millisecond, "the watch's wake-up ran a pass")
}

// TestRunnerStopsOnCancel (issue 40, point 2): when its context ends, Run
// cancels the passes running, waits for them, returns, and starts no pass
// afterwards.
func TestRunnerStopsOnCancel(t *testing.T) {
	var calls atomic.Int32
	started := make(chan struct{}, 1)
	loop := reboot.Loop{Name: "l", Reconcile: func(ctx context.Context, _ string) (reboot.Next, error) {
		calls.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done() // a pass that waits on I/O until cancelled
		return reboot.Next{}, ctx.Err()
	}}
	r := &reboot.Runner{Loops: []reboot.Loop{loop}, MinBackoff: time.Millisecond}
	stop := runFor(t, r)
	require.NoError(t, r.Add("l", "k"))
	<-started
	assert.ErrorIs(t, stop(), context.Canceled)
	n := calls.Load()
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, n, calls.Load(), "a pass started after Run returned")
}

// TestRunnerFencesOnWatch (issue 40, point 2): the reboot Reconciler run
// by a Runner over a store that watches (fake.RebootHosts) answers a
// fencing client without polling: the host's record change wakes it, and
// the client is told Fenced; then the host comes back on (ground truth:
// it was off after the request). Nothing else drives the passes.
func TestRunnerFencesOnWatch(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	r := &reboot.Runner{Loops: []reboot.Loop{rec.Loop(func(context.Context) ([]string, error) { return []string{"h"}, nil })}}
	runFor(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	assert.True(t, hw.WasOffDuring(tk.At, time.Now()), "fenced, but the hardware was not off since the request")
	require.NoError(t, cl.Release(ctx, tk))
	require.NoError(t, cl.WaitDone(ctx, tk))
	require.Eventually(t, hw.HardwareOn, 20*time.Second, 10*time.Millisecond, "the host comes back on")
}

// A change made while a key has no watch in place (HostWatcher reports
// only the changes made after Watch returned: before the first watch is
// set up, or while a watch that ended is set up again) must still wake the
// key. Before, such a change waited for Resync (10 min by default), and a
// key's first pass could run before its watch was in place:
// remediation/TestRunnerRemediatesWithRebootLoop stalled 30 s in about 1
// run in 16 under -race for that reason.
func TestRunnerWakesAfterWatchStarts(t *testing.T) {
	var passes atomic.Int32
	firstPass := make(chan struct{})
	var changed atomic.Bool
	var once sync.Once
	var watchTries atomic.Int32
	r := &reboot.Runner{Resync: time.Hour, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(context.Context) ([]string, error) { return []string{"h"}, nil },
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			once.Do(func() { close(firstPass) })
			return reboot.Next{}, nil
		},
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			ch := make(chan struct{})
			if watchTries.Add(1) == 1 {
				// The first watch ends after the first pass; the key
				// changes while no watch is in place.
				go func() {
					<-firstPass
					changed.Store(true)
					close(ch)
				}()
				return ch, nil
			}
			go func() { <-ctx.Done(); close(ch) }()
			return ch, nil
		},
	}}}
	stop := runFor(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for !changed.Load() || passes.Load() < 2 || watchTries.Load() < 2 {
		require.True(t, time.Now().Before(deadline),
			"the change made while no watch was in place never reconciled (passes %d, watch tries %d)", passes.Load(), watchTries.Load())
		time.Sleep(5 * time.Millisecond)
	}
	assert.ErrorIs(t, stop(), context.Canceled)
}

// A key whose watch cannot be set up is still reconciled at once (its
// first pass waits only for the first try of its watch).
func TestRunnerReconcilesKeyWithoutWatch(t *testing.T) {
	var passes atomic.Int32
	r := &reboot.Runner{Resync: time.Hour, MinBackoff: time.Hour, Loops: []reboot.Loop{{
		Name: "reboot",
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
		Watch: func(context.Context, string) (<-chan struct{}, error) { return nil, errors.New("watch refused") },
	}}}
	stop := runFor(t, r)
	require.NoError(t, r.Add("reboot", "h"))
	require.Eventually(t, func() bool { return passes.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.ErrorIs(t, stop(), context.Canceled)
}

// TestRunnerRetriesStandbySoon (review 36 round 8, low (a)): nothing tells
// a standby when it wins the leadership, so a pass refused for it
// (reboot.ErrNotLeader) runs again after at most StandbyRetry, whatever
// the back-off: a request that came during a failover does not wait
// MaxBackoff after the lease is won. (Before: the key backed off as after
// any failure, here an hour.)
func TestRunnerRetriesStandbySoon(t *testing.T) {
	var passes atomic.Int32
	done := make(chan struct{})
	loop := reboot.Loop{Name: "l", Reconcile: func(ctx context.Context, k string) (reboot.Next, error) {
		switch n := passes.Add(1); {
		case n <= 3:
			return reboot.Next{}, fmt.Errorf("reboot: update host %s: %w", k, reboot.ErrNotLeader)
		case n == 4:
			close(done) // leads now
		}
		return reboot.Next{}, nil
	}}
	r := &reboot.Runner{Loops: []reboot.Loop{loop}, MinBackoff: time.Hour, MaxBackoff: time.Hour,
		StandbyRetry: 10 * time.Millisecond}
	stop := runFor(t, r)
	require.NoError(t, r.Add("l", "h"))
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("a key refused for leadership was not retried within StandbyRetry (passes: %d): it waits the back-off", passes.Load())
	}
	require.ErrorIs(t, stop(), context.Canceled)
}
