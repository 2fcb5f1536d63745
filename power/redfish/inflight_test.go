package redfish_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFenceNotHeldByReadsInFlight (issue 35, round 21's cap of the
// requests in flight per session): with MaxInFlight 1 and blade 2's read
// hanging at the BMC, another read on the session waits (bounded by its
// caller's context) as long as the hanging read is not overdue (here
// made longer than the wait: readplace.go), but blade 1's fence goes out
// at once: a power command never queues behind reads. Ground truth:
// blade 1's hardware.
func TestFenceNotHeldByReadsInFlight(t *testing.T) {
	t.Cleanup(redfish.SetOverdueFloor35v(time.Minute))
	hw1, hw2 := fake.NewPower(time.Now, fake.PowerConfig{}), fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", "pw")
	b.AddSystem("2", hw2)
	var hang atomic.Bool
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() && r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems/2" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		b.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	ctx := context.Background()
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool, MaxInFlight: 1}
	c1, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	cfg.SystemID = "2"
	c2, err := redfish.Connect(power.WithConnectInfo(ctx, power.ConnectInfo{Shared: c1}), cfg)
	require.NoError(t, err)
	hang.Store(true)
	go func() {
		_, _ = c2.State(ctx) // hangs at the BMC, holding the one place
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("blade 2's read never reached the BMC")
	}

	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c1.State(rctx)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "a read past MaxInFlight did not wait for a place: %v", err)

	fctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	require.NoError(t, c1.Off(fctx, power.ModeHard), "blade 1's fence queued behind blade 2's read")
	s, _ := hw1.State(ctx)
	assert.Equal(t, power.StateOff, s, "blade 1, fenced, is still powered")
}
