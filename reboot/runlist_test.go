package reboot_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
)

// syncBuffer is a bytes.Buffer safe for a Logger written from goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunnerRetriesFailedListingWithBackoff (review 40aa,
// TestReview40aa_FailedFirstListingStallsUntilResync): a listing that
// keeps failing is tried again with a back-off that doubles from
// MinBackoff up to its cap (MaxBackoff here, below MaxListRetry), each
// failure logged with its retry delay, until one succeeds and its keys
// are reconciled; then no further listing comes before Resync.
func TestRunnerRetriesFailedListingWithBackoff(t *testing.T) {
	const fails = 5
	var mu sync.Mutex
	var at []time.Time
	var passes atomic.Int32
	logs := &syncBuffer{}
	r := &reboot.Runner{Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) <= fails {
				return nil, errors.New("inventory not answering yet")
			}
			return []string{"h"}, nil
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
	}}, MinBackoff: 20 * time.Millisecond, MaxBackoff: 80 * time.Millisecond, Resync: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return passes.Load() > 0 }, 10*time.Second, 5*time.Millisecond,
		"host h not reconciled after failed listings")
	time.Sleep(300 * time.Millisecond) // no listing after the one that succeeded
	require.ErrorIs(t, stop(), context.Canceled)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, fails+1, "listings: %d failed, then one that succeeded, then none before Resync", fails)
	// Waits before tries 2..6: 20, 40, 80, 80, 80 ms (doubling, capped).
	want := []time.Duration{20, 40, 80, 80, 80}
	for i, w := range want {
		gap := at[i+1].Sub(at[i])
		assert.GreaterOrEqual(t, gap, w*time.Millisecond, "wait before listing %d", i+2)
		assert.Less(t, gap, w*time.Millisecond+time.Second, "wait before listing %d", i+2)
	}
	out := logs.String()
	assert.Equal(t, fails, strings.Count(out, "list keys failed"), "one log line per failed listing:\n%s", out)
	assert.Contains(t, out, "retry in 20ms")
	assert.Contains(t, out, "retry in 80ms")
	assert.Contains(t, out, "inventory not answering yet")
}

// TestRunnerAddAfterRunReturns: once Run has returned, Add never blocks
// (its 1,024-slot queue is full and nobody reads it) and says why.
func TestRunnerAddAfterRunReturns(t *testing.T) {
	r := &reboot.Runner{Loops: []reboot.Loop{{Name: "l",
		Reconcile: func(context.Context, string) (reboot.Next, error) { return reboot.Next{}, nil }}}}
	stop := runFor(t, r)
	require.NoError(t, r.Add("l", "h"))
	require.ErrorIs(t, stop(), context.Canceled)
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 3000 && err == nil; i++ {
			err = r.Add("l", "h")
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, reboot.ErrRunnerStopped)
	case <-time.After(10 * time.Second):
		t.Fatal("Runner.Add blocked after Run returned")
	}
}
