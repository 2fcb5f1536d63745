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

// TestReview35_OpenSessionSuccessesResetWrongPasswordBackoff: the package
// doc: after an authentication failure logins back off 30 s doubling to
// 30 min, "so a BMC with a wrong password sees at most two logins a
// minute with it"; and "A success, or an answer from the BMC, ends the
// back-off of its login". Behind one BMC that does not share sessions (an
// IPMI multi-node chassis: one address, a session per node), nodes A and
// E use the same credentials (the same Login). The password is changed on
// the BMC: A's session, opened before, still works (a session outlives a
// password change), E's login is refused. Every answer on A's session
// ends the back-off of the credentials, so E's next read logs in again
// with the refused password: one wrong-password login per read of E (every
// 5 s: 12 a minute, enough to lock the account on a BMC that locks after
// a few failures). Ground truth: the logins the BMC got with the refused
// password.
func TestReview35_OpenSessionSuccessesResetWrongPasswordBackoff(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	var rotated atomic.Bool
	var refused atomic.Int32
	target := func() power.Target {
		return power.Target{BMC: "chassis:623", Config: "admin/v1", Login: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
			if rotated.Load() {
				refused.Add(1)
				return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Message: "RAKP: unauthorized name", Err: power.ErrAuth}
			}
			return alwaysOn{}, nil // no SessionSharer: a session per node
		}}
	}
	a := pool.Controller("node-a", target())
	_, err := a.State(ctx)
	require.NoError(t, err)
	rotated.Store(true) // the password changes on the BMC; A's session lives on
	e := pool.Controller("node-e", target())
	for range 12 { // a minute, each node read every 5 s
		_, err = a.State(ctx)
		require.NoError(t, err, "A's open session works")
		_, err = e.State(ctx)
		require.ErrorIs(t, err, power.ErrAuth)
		clk.Advance(5 * time.Second)
	}
	t.Logf("logins with the refused password in a minute: %d", refused.Load())
	assert.LessOrEqual(t, refused.Load(), int32(2), "a BMC with a wrong password sees at most two logins a minute with it")
}
