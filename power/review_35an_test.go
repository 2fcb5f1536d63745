package power_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
)

// TestReview35_SlowBMCDeadBladeRefusesHealthyFence (review round 24,
// issue 35 point 1; round 23's "the read beside a slow system read is
// the SessionService ... unanswered, power.Unanswered"). A chassis with
// basic auth whose controller is slow (every request takes 1.3 s; a
// Connect, two requests, takes 2.6 s, within the Pool's 3.2 s
// ConnectTimeout) and a dead blade 2 (its reads hang). The monitor's
// Connect for blade 2, just after rebootctl started (nothing answered
// yet): the service root (1.3 s), then the direct read hangs; the
// SessionService read, sent beside it only after half the time left
// (0.95 s), would be answered 1.3 s later, past the deadline, so redfish
// says power.Unanswered and the Pool backs the login off as after a
// refused password (AuthBackoff, 30 s). The operator then fences healthy
// host 1 (not yet connected), whose own Connect and Off take 5.2 s: the
// Pool refuses it, "login not tried", for 30 s. A neighbour's dead blade
// on a slow BMC delays a healthy host's fence by AuthBackoff (doubling
// while the dead blade's Connects go first). Ground truth: blade 1's
// power, still on; the control (Q35CTL=1, no dead neighbour first)
// fences it. Before round 23 this Connect was the host's own
// (power.AfterLogin), and the fence went.
func TestReview35_SlowBMCDeadBladeRefusesHealthyFence(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var answeredWithCreds atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a slow chassis controller
		case <-time.After(1300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2") {
			<-r.Context().Done() // the dead blade
			return
		}
		if r.Header.Get("Authorization") != "" {
			answeredWithCreds.Add(1)
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 3200 * time.Millisecond, CallTimeout: 10 * time.Second})
	target := func(id string) power.Target {
		cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
		return power.Target{BMC: srv.URL, Config: id + "/basic", Login: "admin/pw",
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
	}
	ctx := context.Background()
	var err error
	if os.Getenv("Q35CTL") == "" { // Q35CTL=1: the control, no dead neighbour first: the fence works
		_, err = pool.Controller("h2", target("2")).State(ctx)
	}
	t.Logf("dead blade 2's State: %v (unanswered: %v); requests the BMC answered with the credentials: %d",
		err, errors.Is(err, power.ErrUnanswered), answeredWithCreds.Load())
	clk.Advance(2 * time.Second)
	err = pool.Controller("h1", target("1")).Off(ctx, power.ModeHard)
	t.Logf("healthy host 1's fence: %v", err)
	assert.NoError(t, err, "a healthy host's fence refused after a dead neighbour's Connect on a slow BMC")
	assert.False(t, errors.Is(err, power.ErrBackoff), "the fence was not even tried (the login backs off as after a refused password)")
	st, _ := hw1.State(ctx)
	assert.Equal(t, power.StateOff, st, "ground truth: blade 1 is still on")
}
