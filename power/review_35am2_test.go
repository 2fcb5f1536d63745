package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35am2_BasicAuthSystem401PolledTwiceBacksOffNeighbour (review
// 35am, issue 35 item 1: "a host's failure never refuses another host
// whose credentials differ or whose session is open"; package doc:
// "Calls on an open session are always tried, whatever any login's
// back-off: one host's wrong password never refuses another host whose
// credentials differ or whose session is open"). Round 38 fixed
// TestReview35al_BasicAuthSystem401BacksOffNeighbour only for the case
// where host A is read once: A's system answers 401 (a per-blade
// privilege, a proxy in front of it), its call retires the session it
// shares with host B without counting (B was answered since), but A's
// NEXT read, one second later (a job polls the host it acts on more
// often than its neighbours), is a new login (a BasicAuth Connect reading
// A's system), whose 401 is taken for a refusal of the credentials: a
// 30 s authentication back-off, and B, whose reads with the very same
// credentials the BMC answered two seconds before, is refused with
// ErrBackoff for State and for a fence (Off). Ground truth: the wrapper
// denies system 1 only; the BMC answers B's system to these credentials
// throughout.
func TestReview35am2_BasicAuthSystem401PolledTwiceBacksOffNeighbour(t *testing.T) {
	ch := newChassis35al(t, "/redfish/v1/Systems/1")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.targetAuth("1", true))
	b := pool.Controller("b", ch.targetAuth("2", true))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)

	ch.deny401.Store(true) // A's system only: not the credentials
	_, errA1 := a.State(ctx)
	require.Error(t, errA1, "A's system is denied")
	clk.Advance(time.Second)
	_, errA2 := a.State(ctx)
	require.Error(t, errA2, "A's system is denied")
	clk.Advance(time.Second)
	_, err = b.State(ctx)
	assert.NoError(t, err,
		"host B (its reads with these credentials answered 2 s ago, the BMC answers them still) refused because host A's system answered 401 twice (A: %v; %v)", errA1, errA2)
	assert.NoError(t, b.Off(ctx, power.ModeSoft), "host B's fence refused because host A's system answered 401")
}

// TestReview35am2_IPMITwoHostsOneBMCRotatedTwoRefusedLoginsAtOnce (review
// 35am, issue 35 item 6: "route every login through it"; package doc
// Guarantees: "Between two logins to a BMC with credentials it refused
// last there are at least AuthBackoff"). Round 38's refusedInCallLocked
// counts an IPMI in-call re-login's refusal only if no other host's call
// with these credentials was answered since this host's. Two hosts whose
// targets name one IPMI BMC with one Secret (nothing in kube rejects two
// BareMetalHosts at one address; the package doc's assumption "an IPMI
// BMC serves one host") each hold a session; the BMC is reset with a
// rotated password. Host h0's in-call re-login is refused and not
// counted (h1 was answered last), and h1's in-call re-login, outside the
// gate, is sent at once: two refused logins with no pause between them.
// Ground truth: the emulator's own RMCP+ Open Session count, with the
// Pool's clock standing still.
func TestReview35am2_IPMITwoHostsOneBMCRotatedTwoRefusedLoginsAtOnce(t *testing.T) {
	clk := newClock()
	old, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
	require.NoError(t, err)
	addr := old.Addr()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	tg := ipmiTarget(old, bmcPassword)
	ctx := context.Background()
	h0, h1 := pool.Controller("h0", tg), pool.Controller("h1", tg)
	_, err = h0.State(ctx)
	require.NoError(t, err)
	_, err = h1.State(ctx)
	require.NoError(t, err)

	require.NoError(t, old.Close())
	rotated, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: "Rotated-0ther", Addr: addr})
	require.NoError(t, err)
	defer rotated.Close()

	_, err0 := h0.State(ctx)
	require.ErrorIs(t, err0, power.ErrAuth)
	_, err1 := h1.State(ctx)
	assert.LessOrEqual(t, rotated.Logins(), 1,
		"refused logins with one password and no time between them (AuthBackoff 30 s); h0: %v; h1: %v", err0, err1)
}

// pausedCtx35am2 is a caller's context after a process pause: its
// deadline is past but its timer has not fired yet (Done open, Err nil),
// the case internal/clockctx bounds.
type pausedCtx35am2 struct{ context.Context }

func (pausedCtx35am2) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// TestReview35am2_IPMIPausedOffUnsentNotErrNotSent (review 35am, Low;
// power.ErrNotSent: "a command whose error matches ErrNotSent certainly
// changed nothing"; power/ipmi notSent). Round 38 bounds the Pool's call
// context by the clock (clockctx.Bound): after a pause past the caller's
// deadline, power/ipmi's link sees ctx.Err() before writing the Chassis
// Control and sends nothing, but Controller.do takes that error for
// session trouble: it reports the power-down as maybe sent ("no usable
// answer", not ErrNotSent) and drops the session (a Close Session sent,
// a new login at the next call). Ground truth: the emulator's own list
// of chassis commands received, and its login count.
func TestReview35am2_IPMIPausedOffUnsentNotErrNotSent(t *testing.T) {
	pool := newPool(t, nil, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ib, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
	require.NoError(t, err)
	defer ib.Close()
	c := pool.Controller("i", ipmiTarget(ib, bmcPassword))
	_, err = c.State(context.Background())
	require.NoError(t, err)
	logins := ib.Logins()

	err = c.Off(pausedCtx35am2{context.Background()}, power.ModeHard)
	require.Error(t, err)
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, []string{ipmitest.Status}, ib.Commands(), "no power command reached the BMC")
	assert.ErrorIs(t, err, power.ErrNotSent, "a power-down the BMC never received is reported as maybe sent")
	_, err = c.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, logins, ib.Logins(), "the session was dropped for a call that sent nothing: a new login")
}
