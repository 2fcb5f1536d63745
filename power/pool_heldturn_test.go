package power_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authCallsController sends the credentials with every call
// (power.CallAuthenticator); its reads hang until their deadline while
// hang is set.
type authCallsController struct {
	hang  *atomic.Bool
	reads *atomic.Int32 // reads that reached it
}

func (c authCallsController) State(ctx context.Context) (power.State, error) {
	c.reads.Add(1)
	if c.hang.Load() {
		<-ctx.Done()
		return power.StateUnknown, ctx.Err()
	}
	return power.StateOn, nil
}
func (c authCallsController) On(context.Context) error              { return nil }
func (c authCallsController) Off(context.Context, power.Mode) error { return nil }
func (c authCallsController) AuthenticatesCalls() bool              { return true }

// TestHeldReadTurnsAndMessage (issue 35, heldReadLocked): hosts D (dead:
// its reads hang) and A share credentials sent with every call; A's one
// read hangs too, then A answers again. Once nothing with the credentials
// was answered for LoginInterval, D's reads are held: one a pause apart,
// the others refused unsent with an error that says what happened (a
// read ran out of time, the BMC is probed) and matches ErrBackoff and
// ErrNotSent, without claiming a login failed. A, which waited a whole
// round (a pause per host waiting) since its own last call, is sent in
// D's pause (one such read per pause), and its answer ends the hold.
func TestHeldReadTurnsAndMessage(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 50 * time.Millisecond, AuthBackoff: 30 * time.Second})
	var hangD, hangA atomic.Bool
	var readsD, readsA atomic.Int32
	host := func(name string, hang *atomic.Bool, reads *atomic.Int32) power.Controller {
		return pool.Controller(name, power.Target{BMC: "chassis", Config: name, Login: "admin",
			Connect: func(context.Context) (power.Controller, error) {
				return authCallsController{hang: hang, reads: reads}, nil
			}})
	}
	d, a := host("D", &hangD, &readsD), host("A", &hangA, &readsA)
	ctx := context.Background()
	for _, c := range []power.Controller{d, a} {
		_, err := c.State(ctx)
		require.NoError(t, err)
	}
	hangD.Store(true)
	hangA.Store(true)
	_, err := a.State(ctx)
	require.Error(t, err, "A's one slow read")
	hangA.Store(false)
	for range 11 { // D's unanswered reads within a minute of the last answer: not held yet
		clk.Advance(5 * time.Second)
		_, err := d.State(ctx)
		require.Error(t, err)
		require.NotErrorIs(t, err, power.ErrNotSent, "a read within LoginInterval of the last answer is sent")
	}
	clk.Advance(5 * time.Second)
	before := readsD.Load()
	_, err = d.State(ctx)
	require.Error(t, err)
	require.Equal(t, before+1, readsD.Load(), "D's read, its turn, is sent")
	clk.Advance(5 * time.Second)
	_, err = d.State(ctx)
	require.ErrorIs(t, err, power.ErrNotSent, "D's next read, in the pause, is held")
	assert.ErrorIs(t, err, power.ErrBackoff)
	assert.Equal(t, before+1, readsD.Load(), "a held read reached the BMC")
	msg := err.Error()
	t.Logf("held read: %v", msg)
	assert.Contains(t, msg, "ran out of time unanswered", "the error says what happened")
	assert.Contains(t, msg, "probed", "the error says the BMC is probed")
	assert.NotContains(t, msg, "logins", "no login failed")
	assert.NotContains(t, msg, "backing off", "no login backs off")

	_, err = a.State(ctx)
	require.NoError(t, err, "A, which waited a whole round, is sent within D's pause, and answered")
	before = readsD.Load()
	_, err = d.State(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, power.ErrNotSent, "A's answer ends the hold")
	assert.Equal(t, before+1, readsD.Load())
}
