package power_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_NeighbourReadCancelsFenceJoin (review round 19, issue 35
// point 1: "a working host never refused because of a neighbour"): the
// bound (2) holds A's session (idle) and the kept session K of login k
// (left by host M, whose system is not on the chassis). Host D (login k,
// a working system that the BMC reads in 1.5 s) is fenced: the fence
// joins K. Meanwhile host E (login e, proven here earlier, its session
// closed when idle) is read by a caller with a 2 s deadline: its login
// waits for D's join half its time left (1 s), then retires K and
// cancels D's join. D's fence fails, never sent, although D's
// credentials and system work: a neighbour's read, not even a fence,
// refused it. Ground truth: the emulator's reset log and D's hardware.
func TestReview35_NeighbourReadCancelsFenceJoin(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwD := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwD)
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(slowSystem(b, "2", 1500*time.Millisecond))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	e := pool.Controller("e", loginTarget(srv, "3", "secret-e/v1"))
	kt := func(id string) power.Target {
		t := loginTarget(srv, id, "sys="+id)
		t.Login = "secret-k/v1"
		return t
	}
	m := pool.Controller("m", kt("9"))
	d := pool.Controller("d", kt("2"))

	_, err := e.State(ctx)
	require.NoError(t, err)
	clk.Advance(4 * time.Minute)
	_, err = a.State(ctx)
	require.NoError(t, err)
	clk.Advance(61 * time.Second) // E's session idle for IdleTimeout: closed
	power.Sweep(pool)
	_, err = m.State(ctx) // kept session K of login k
	require.Error(t, err)

	fence := make(chan error, 1)
	go func() { fence <- d.Off(ctx, power.ModeHard) }()
	time.Sleep(200 * time.Millisecond) // D joins K
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, rerr := e.State(rctx)
	cancel()
	err = <-fence
	t.Logf("E's read: %v; D's fence: %v", rerr, err)
	assert.NoError(t, err, "host D's fence was cancelled by neighbour E's read")
	assert.Contains(t, b.Resets(), "ForceOff")
	s, _ := hwD.State(ctx)
	assert.Equal(t, power.StateOff, s, "host D is still powered")
}
