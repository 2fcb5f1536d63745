package power_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/require"
)

// hangingLogout is a controller whose logout never gets an answer (its
// BMC went away after the login).
type hangingLogout struct {
	power.Controller
	release chan struct{}
}

func (c hangingLogout) Close() error { <-c.release; return nil }

// TestReview35_CloseTimeGrowsWithDeadBMCs: Pool.Close "closes every
// session (waiting up to 10 s for each BMC's logout)"; the package doc:
// "dead BMCs' hanging logouts never hold up another BMC". Close has no
// context, and the logouts run at most maxClosers (64) BMCs at a time:
// with 130 BMCs gone (a rack or a site partitioned away after the
// logins), each logout hangs its 10 s and Close takes ceil(130/64) = 3
// rounds, 30 s; at 10,000 BMCs, 26 minutes, during which the process
// cannot stop (the controller's and rebootctl's shutdown run
// `defer pool.Close()`). Close must be bounded by the logout timeout, not
// by the number of dead BMCs.
func TestReview35_CloseTimeGrowsWithDeadBMCs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	pool := power.NewPool(power.PoolConfig{})
	ctx := context.Background()
	for i := range 130 {
		bmc := fmt.Sprintf("https://bmc-%03d", i)
		_, err := pool.Controller(fmt.Sprintf("host-%03d", i), power.Target{BMC: bmc, Config: "v1", Connect: func(context.Context) (power.Controller, error) {
			return hangingLogout{Controller: alwaysOn{}, release: release}, nil
		}}).State(ctx)
		require.NoError(t, err)
	}
	done := make(chan struct{})
	start := time.Now()
	go func() { _ = pool.Close(); close(done) }()
	select {
	case <-done:
		t.Logf("Close took %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatalf("Close still running after %s with 130 dead BMCs (10 s logout timeout): it grows with the number of dead BMCs", time.Since(start).Round(time.Millisecond))
	}
}
