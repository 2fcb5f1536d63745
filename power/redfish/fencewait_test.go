package redfish_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/require"
)

// TestFenceWaitsForNoHangingReadOfItsSystem: a monitor's read of a
// system whose GETs hang at the BMC (sent, holding a read place) does not
// hold up a ForceOff of the same system on the same Controller: power
// commands wait for no read, queued or in flight. Before, State held the
// Controller's one operation lock to its deadline (20 s here) and the
// fence's 3 s ran out waiting for it. Ground truth: the hardware.
func TestFenceWaitsForNoHangingReadOfItsSystem(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	var hang atomic.Bool
	srv, pool := hangingSystemBMC35ab(t, b, &hang, "1")
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	hang.Store(true)

	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	read := make(chan error, 1)
	go func() { _, err := c.State(rctx); read <- err }()
	time.Sleep(200 * time.Millisecond) // the monitor's read is at the BMC, hanging

	fctx, fcancel := context.WithTimeout(ctx, 3*time.Second)
	defer fcancel()
	require.NoError(t, c.Off(fctx, power.ModeHard))
	s, _ := hw.State(ctx)
	require.Equal(t, power.StateOff, s, "the fence was not sent while a read of its system hung")
	select {
	case err := <-read:
		t.Fatalf("the monitor's read ended before its deadline: %v", err)
	default: // the fence cut nothing of the monitor's read
	}
}

// TestResetOnUnreadStateNotSent: a ForceRestart needs a read of On; a
// read that runs out of time sends nothing, and the error says so
// (power.ErrNotSent: the caller may retry at once, no reset can land
// late). Before, Reset returned the read's own error, which a caller
// must take for a reset that may have been carried out.
func TestResetOnUnreadStateNotSent(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	var hang atomic.Bool
	srv, pool := hangingSystemBMC35ab(t, b, &hang, "1")
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	hang.Store(true)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = c.Reset(rctx)
	require.ErrorIs(t, err, power.ErrNotSent)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, b.Resets(), "the BMC received a reset")
}
