package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/require"
)

// TestCloseWhileSharedCallsInFlight (issue 35; CI of stop 46: a data race
// in TestPoolStateMachineDeadBlades): Close of the controller that owns a
// session, while controllers made on that session still send requests,
// must not write what their requests read (gofish's Logout cleared the
// token under them). Run with -race: the race detector is the oracle.
// The shared controllers' calls after the Close fail (their session is
// gone) or succeed after a login of their own; neither is checked here.
func TestCloseWhileSharedCallsInFlight(t *testing.T) {
	hw1, hw2 := fake.NewPower(time.Now, fake.PowerConfig{}), fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", "pw")
	b.AddSystem("2", hw2)
	// Blade 2's reads take 700 ms: a second read waits for the first,
	// holding the session's client, while the owner's Close logs out.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems/2" {
			time.Sleep(700 * time.Millisecond)
		}
		b.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	ctx := context.Background()
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool}
	for round := 0; round < 5; round++ {
		c1, err := redfish.Connect(ctx, cfg)
		require.NoError(t, err)
		cfg2 := cfg
		cfg2.SystemID = "2"
		c2, err := redfish.Connect(power.WithConnectInfo(ctx, power.ConnectInfo{Shared: c1}), cfg2)
		require.NoError(t, err)
		// A Connect on the session whose system read is slow enough
		// for the read beside it (readSystem), as the Pool's joins do.
		joined := make(chan struct{})
		go func() {
			defer close(joined)
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if c3, err := redfish.Connect(power.WithConnectInfo(cctx, power.ConnectInfo{Shared: c1}), cfg2); err == nil {
				_ = c3.Close()
			}
		}()
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, _ = c2.State(cctx)
			}()
		}
		time.Sleep(50 * time.Millisecond) // one read at the BMC, the others waiting
		require.NoError(t, c1.Close())
		wg.Wait()
		<-joined
		_ = c2.Close()
	}
}
