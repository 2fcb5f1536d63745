package power_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/require"
)

// TestReview35af_RespelledBMCHostRefusedForGood (issue 35 point 1: "a
// host's failure never refuses another host whose credentials ... work";
// point 2: share one session per endpoint and credentials; endpoint.go
// Origin: one BMC, two spellings, one origin): one chassis BMC, two
// blades, one login. Host A's endpoint is written
// http://[::ffff:127.0.0.1]:P, host B's http://127.0.0.1:P, and the
// Pool's Target.BMC is their Origin (as kube's ParseBMCAddress and
// inventory name BMCs), so the Pool offers B A's session. redfish's
// sameLogin accepts it (same Origin), but the session's origin check
// (transport.go sameOrigin: literal host names) refuses every request of
// B's Controller; the join fails with ErrAfterLogin (not ErrNotShared, so
// no login of its own), B backs off and joins again, and fails again, for
// as long as A's session lives: host B, whose credentials work, is never
// served (no State, no fence). Ground truth: B's hardware stays on after
// Off calls for 3 s.
func TestReview35af_RespelledBMCHostRefusedForGood(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	hwB := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", "pw")
	b.AddSystem("2", hwB)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	pool := power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second,
		Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	defer pool.Close()
	target := func(ep, system string) power.Target {
		o, err := redfish.Origin(ep)
		require.NoError(t, err)
		cfg := redfish.Config{Endpoint: ep, SystemID: system, Username: "admin", Password: "pw"}
		return power.Target{BMC: o, Config: "admin/" + redfishtest.Fingerprint("admin", "pw"),
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
	}
	cA := pool.Controller("a", target(fmt.Sprintf("http://[::ffff:127.0.0.1]:%d", port), "1"))
	cB := pool.Controller("b", target(fmt.Sprintf("http://127.0.0.1:%d", port), "2"))
	ctx := context.Background()
	_, err := cA.State(ctx)
	require.NoError(t, err)
	var last error
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && hwB.HardwareOn() {
		_, _ = cA.State(ctx) // A's session in use
		last = cB.Off(ctx, power.ModeHard)
		time.Sleep(50 * time.Millisecond)
	}
	require.False(t, hwB.HardwareOn(), "host B (working credentials, same BMC as A) never powered off in 3 s; last error: %v", last)
}
