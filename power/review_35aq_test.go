package power_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35aq_ConfirmedRefusalNeverRechecked (review 35aq; issue 35
// item 1 "A fencing request for A is refused although its credentials
// are right"; power/doc.go "unless they back off after a confirmed
// refusal (a check that refused them: the retry sends the refused
// password once)"). A and B share the credentials on one chassis. The
// BMC refuses the credentials for a while (an account lock-out, an
// LDAP outage: the same password works again afterwards): B's read is
// refused, the check is refused too, creds.confirmed is set. The BMC
// then takes the password again, but A's blade starts answering 401 (a
// per-blade privilege). creds.confirmed is cleared only by a success
// (succeededLocked), and callInfoLocked asks for no check while
// cr.auth && cr.confirmed: every later refusal of A's blade is taken
// for the credentials' (ErrAuth, unchecked) and doubles their back-off,
// A's polls win each end of it, and B's fences are refused for ten
// minutes although the BMC answers B's credentials all along after the
// lock-out (ground truth: a direct read of system 2). "The retry sends
// the refused password once": here it is sent at every end of the
// back-off, unchecked, for ever.
func TestReview35aq_ConfirmedRefusalNeverRechecked(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)

	ch.b.SetCredentials("admin", "Locked-0ut") // the BMC refuses the password for a while
	clk.Advance(5 * time.Second)
	_, errB := b.State(ctx)
	t.Logf("B's read during the lock-out: %v", errB)
	require.Error(t, errB)
	ch.b.SetCredentials("admin", bmcPassword) // the lock-out ends
	ch.mu.Lock()
	before := len(ch.paths)
	ch.mu.Unlock()
	ch.deny1.Store(true)                      // and A's blade refuses
	ch.directState(t, "2")

	refusedB, triesB := 0, 0
	for i := 1; i <= 120; i++ { // ten minutes, A polled every 5 s, B's fence every minute
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
		if i%12 == 0 {
			triesB++
			if err := b.Off(ctx, power.ModeSoft); err != nil {
				refusedB++
				t.Logf("t+%ds B's fence: %v", i*5, err)
			}
		}
	}
	ch.directState(t, "2")
	ch.mu.Lock()
	after := append([]string(nil), ch.paths[before:]...)
	ch.mu.Unlock()
	for _, p := range after {
		require.True(t, strings.HasPrefix(p, "/redfish/v1/Systems/1"), "ground truth: after the lock-out the BMC refused only system 1 (%v)", after)
	}
	t.Logf("401s served after the lock-out: %d, all system 1's", len(after))
	assert.Less(t, refusedB, triesB/2, "B's fences refused for ten minutes (%d of %d) after a lock-out that ended, for A's blade's 401 never checked again", refusedB, triesB)
}
