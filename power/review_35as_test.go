package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35as_FenceConnectRefusedGivesBackPass (review 35as; power/doc.go
// "one power command per back-off window (the first fence is tried: it
// costs at most one more refused request; later ones wait for the window
// to end)"; issue 35 item 2, lock-out budget). A and B share the
// credentials on one chassis (basic auth); B is connected. A's blade
// refuses A's requests (401) before A ever connected: A's connect is
// refused, the check answers the credentials (ErrSystemRefused), A backs
// off alone. A remediation retries A's fence every 5 s. Each fence takes
// the window's fence pass, its connect (the login in acquire) sends A's
// system read, which the BMC refuses, and acquire's error path
// (pool_login.go acquire: giveBackFenceLocked on any error) gives the pass
// back although a request reached the BMC and was refused: every retry
// is a refused request. Ground truth: the 401s the emulator served for
// system 1.
func TestReview35as_FenceConnectRefusedGivesBackPass(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 2)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := b.State(ctx)
	require.NoError(t, err)

	ch.deny1.Store(true) // A's blade refuses, for ever
	clk.Advance(time.Second)
	_, errA := a.State(ctx)
	t.Logf("A's first read (its connect), its blade refusing: %v", errA)
	require.ErrorIs(t, errA, power.ErrSystemRefused, "precondition: the check answered the credentials")

	start, ss0 := len(ch.refusals()), ch.ssReads.Load()
	fences := 0
	for i := 0; i < 12; i++ { // one minute of fences every 5 s
		clk.Advance(5 * time.Second)
		err := a.Off(ctx, power.ModeHard)
		if i < 3 {
			t.Logf("fence %d: %v", i+1, err)
		}
		fences++
	}
	refused := len(ch.refusals()) - start
	t.Logf("%d fences of A in a minute: %d requests refused (401) by the BMC, %d SessionService reads (checks)", fences, refused, ch.ssReads.Load()-ss0)
	assert.LessOrEqual(t, refused, 3, "401s the BMC served in one minute for A's fences retried every 5 s (doc: one fence per back-off window, AuthBackoff 30 s)")
}
