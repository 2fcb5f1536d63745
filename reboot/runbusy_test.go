package reboot_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestRunnerKeepsUnlistedBusyKey: a key no longer listed is kept (its
// passes go on, its watch stays) while its last pass that succeeded said
// Next.Busy, also through passes that fail; the first pass that succeeds
// without Busy lets the next tick forget it, with a pass due (After).
func TestRunnerKeepsUnlistedBusyKey(t *testing.T) {
	const (
		working = iota
		failing
		done
	)
	var mode, lists, passes atomic.Int32
	var watchEnded atomic.Bool
	r := &reboot.Runner{Resync: 50 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Loops: []reboot.Loop{{
			Name: "reboot",
			Keys: func(context.Context) ([]string, error) {
				if lists.Add(1) == 1 {
					return []string{"k"}, nil
				}
				return nil, nil
			},
			Reconcile: func(context.Context, string) (reboot.Next, error) {
				passes.Add(1)
				switch mode.Load() {
				case working:
					return reboot.Next{Busy: true, After: 5 * time.Millisecond}, nil
				case failing:
					return reboot.Next{}, errors.New("store: unavailable")
				}
				return reboot.Next{After: 5 * time.Millisecond}, nil
			},
			Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
				ch := make(chan struct{})
				go func() {
					<-ctx.Done()
					watchEnded.Store(true)
					close(ch)
				}()
				return ch, nil
			},
		}}}
	stop := runFor(t, r)
	progress := func(what string) {
		t.Helper()
		n := passes.Load()
		require.Eventually(t, func() bool { return passes.Load() >= n+5 }, 10*time.Second, time.Millisecond, what)
	}
	require.Eventually(t, func() bool { return lists.Load() >= 4 }, 10*time.Second, time.Millisecond)
	progress("busy, unlisted: still reconciled")
	mode.Store(failing)
	l := lists.Load()
	require.Eventually(t, func() bool { return lists.Load() >= l+3 }, 10*time.Second, time.Millisecond)
	progress("busy, its passes failing: still reconciled")
	require.False(t, watchEnded.Load(), "a busy key's watch ended")
	mode.Store(done)
	require.Eventually(t, watchEnded.Load, 10*time.Second, time.Millisecond, "a key no longer busy nor listed is still watched")
	time.Sleep(20 * time.Millisecond)
	n := passes.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, n, passes.Load(), "a forgotten key is still reconciled")
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestRunnerFailedPassBusyOrIdle: a failed pass counts when it says
// what it read: Busy keeps an unlisted key from its first pass on (a
// restarted controller whose passes fail after reading a held host), and
// Idle then lets the next tick forget it, its passes still failing.
func TestRunnerFailedPassBusyOrIdle(t *testing.T) {
	var idle atomic.Bool
	var lists, passes atomic.Int32
	r := &reboot.Runner{Resync: 50 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Loops: []reboot.Loop{{
			Name: "reboot",
			Keys: func(context.Context) ([]string, error) {
				if lists.Add(1) == 1 {
					return []string{"k"}, nil
				}
				return nil, nil
			},
			Reconcile: func(context.Context, string) (reboot.Next, error) {
				passes.Add(1)
				if idle.Load() {
					return reboot.Next{Idle: true}, errors.New("bmc: credentials not ready")
				}
				return reboot.Next{Busy: true}, errors.New("bmc: credentials not ready")
			},
		}}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return lists.Load() >= 5 }, 10*time.Second, time.Millisecond)
	n := passes.Load()
	require.Eventually(t, func() bool { return passes.Load() >= n+5 }, 10*time.Second, time.Millisecond,
		"a key whose failed passes say Busy, unlisted: no longer reconciled")
	idle.Store(true)
	l := lists.Load()
	require.Eventually(t, func() bool { return lists.Load() >= l+3 }, 10*time.Second, time.Millisecond)
	n = passes.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, n, passes.Load(), "a key whose failed passes say Idle, unlisted, is still reconciled")
	require.ErrorIs(t, stop(), context.Canceled)
}
