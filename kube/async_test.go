package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// hangs is a BMC whose calls block until released (or their context
// ends), counting the calls that started.
type hangs struct {
	release chan struct{}
	calls   atomic.Int32
}

func (h *hangs) wait(ctx context.Context) error {
	h.calls.Add(1)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hangs) State(ctx context.Context) (power.State, error) { return power.StateOn, h.wait(ctx) }
func (h *hangs) On(ctx context.Context) error                   { return h.wait(ctx) }
func (h *hangs) Off(ctx context.Context, _ power.Mode) error    { return h.wait(ctx) }

// TestAsyncHoldsNoWorker (issue 39, point 5): through Async, a call to a
// hung BMC returns ErrInFlight (busy) after Wait, further calls of that
// host return at once without a second call to the BMC, a late result is
// not handed to a later pass but reported through Done, and a healthy
// host's calls are untouched.
func TestAsyncHoldsNoWorker(t *testing.T) {
	hung := &hangs{release: make(chan struct{})}
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	done := make(chan string, 10)
	a := &Async{Wait: 50 * time.Millisecond, Done: func(h string) { done <- h },
		Power: func(name string) (power.Controller, error) {
			if name == "hung" {
				return hung, nil
			}
			return hw, nil
		}}
	ctx := context.Background()
	pc, err := a.Controller("hung")
	require.NoError(t, err)
	start := time.Now()
	s, err := pc.State(ctx)
	assert.ErrorIs(t, err, ErrInFlight)
	assert.ErrorIs(t, err, power.ErrBusy, "busy: read again later")
	assert.Equal(t, power.StateUnknown, s)
	assert.Less(t, time.Since(start), 5*time.Second)
	start = time.Now()
	assert.ErrorIs(t, pc.Off(ctx, power.ModeHard), ErrInFlight)
	assert.Less(t, time.Since(start), 40*time.Millisecond, "no wait while a call is in flight")
	assert.Equal(t, int32(1), hung.calls.Load(), "one call at a time per host")
	assert.True(t, a.InFlight("hung"))

	healthy, err := a.Controller("ok")
	require.NoError(t, err)
	require.NoError(t, healthy.Off(ctx, power.ModeHard))
	assert.False(t, hw.HardwareOn())

	close(hung.release)
	select {
	case h := <-done:
		assert.Equal(t, "hung", h)
	case <-time.After(10 * time.Second):
		t.Fatal("Done was not told")
	}
	assert.False(t, a.InFlight("hung"))
	s, err = pc.State(ctx)
	require.NoError(t, err, "a new call after the end")
	assert.Equal(t, power.StateOn, s)
	assert.False(t, errors.Is(err, ErrInFlight))
	assert.Equal(t, int32(2), hung.calls.Load())
}
