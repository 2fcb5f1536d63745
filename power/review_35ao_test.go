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
	"github.com/stretchr/testify/require"
)

// TestReview35_OneTimeoutThenQuietRefusesHealthyFence (review round 25,
// issue 35; round 24's fix ee3ff9f, pool_login.go acquireLocked: "a
// basic-auth session whose last call ran out of time unanswered is
// retired, and its login backed off, before the next call sends the
// credentials"). A healthy basic-auth host, connected and answering. One
// of its State calls meets a slow moment of the BMC (one read takes
// 600 ms) and runs out of its 250 ms CallTimeout; the BMC answers every
// request at once again right after. Nothing is asked of the BMC for a
// minute (a remediation controller that calls only when it acts; the
// LoginInterval). The operator then fences the host: the Pool retires
// its working session because of that one old timeout, backs the login
// off (Backoff, 1 s) and refuses the fence at once, "login not tried"
// (ErrBackoff): not one request of the fence reaches the BMC, which
// answers everything, with the right password. Ground truth: the host's
// power, still on, and the BMC's count of requests after the quiet
// minute (0). The control (Q35CTL=1: no slow read first) fences it.
// The retire-before-send guard should at most log in again (the login
// itself tells a refused password from a working one), not refuse the
// call that would find out.
func TestReview35_OneTimeoutThenQuietRefusesHealthyFence(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	var slow atomic.Bool
	var reqs atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		if slow.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/1") {
			select { // one slow moment of the BMC's
			case <-time.After(600 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 2 * time.Second, CallTimeout: 250 * time.Millisecond})
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
	c := pool.Controller("h1", power.Target{BMC: srv.URL, Config: "1/basic", Login: "admin/pw",
		Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
	ctx := context.Background()
	for range 3 {
		_, err := c.State(ctx)
		require.NoError(t, err, "the host answers")
		clk.Advance(5 * time.Second)
	}
	if os.Getenv("Q35CTL") == "" {
		slow.Store(true)
		_, err := c.State(ctx)
		t.Logf("the State call in the BMC's slow moment: %v", err)
		slow.Store(false)
	}
	time.Sleep(700 * time.Millisecond) // the slow request returned
	clk.Advance(61 * time.Second)      // a quiet minute
	before := reqs.Load()
	err := c.Off(ctx, power.ModeHard)
	t.Logf("the healthy host's fence after a quiet minute: %v; requests it sent the BMC: %d", err, reqs.Load()-before)
	assert.NoError(t, err, "a healthy host's fence refused because of one timed-out read a minute before")
	assert.False(t, errors.Is(err, power.ErrBackoff), "the fence was not even tried (login backed off by the host's own old timeout)")
	st, _ := hw.State(ctx)
	assert.Equal(t, power.StateOff, st, "ground truth: the host is still on")
}

// TestReview35_NeighbourTimeoutThenQuietRefusesHealthyFence (review
// round 25, issue 35; the same guard as
// TestReview35_OneTimeoutThenQuietRefusesHealthyFence, acquireLocked): a
// chassis with basic auth, healthy blade 1 and blade 2, both connected
// with the same account and answering. Blade 2 dies; one State call of
// its runs out of its 250 ms CallTimeout (blade 1 is not asked then).
// After a quiet minute the operator fences healthy blade 1: its fence is
// refused, "login not tried" (ErrBackoff), not one request sent, because
// of the neighbour's one timeout a minute before. Ground truth: blade
// 1's power, still on; the control (Q35CTL=1: blade 2 not polled) fences
// it.
func TestReview35_NeighbourTimeoutThenQuietRefusesHealthyFence(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var dead atomic.Bool
	var reqs atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		if dead.Load() && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2") {
			<-r.Context().Done() // the dead blade
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 2 * time.Second, CallTimeout: 250 * time.Millisecond})
	target := func(id string) power.Target {
		cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
		return power.Target{BMC: srv.URL, Config: id + "/basic", Login: "admin/pw",
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
	}
	c1, c2 := pool.Controller("h1", target("1")), pool.Controller("h2", target("2"))
	ctx := context.Background()
	for range 3 {
		_, err := c1.State(ctx)
		require.NoError(t, err, "blade 1 answers")
		_, err = c2.State(ctx)
		require.NoError(t, err, "blade 2 answers")
		clk.Advance(5 * time.Second)
	}
	dead.Store(true)
	if os.Getenv("Q35CTL") == "" {
		_, err := c2.State(ctx)
		t.Logf("dead blade 2's State: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	clk.Advance(61 * time.Second) // a quiet minute
	before := reqs.Load()
	err := c1.Off(ctx, power.ModeHard)
	t.Logf("healthy blade 1's fence after a quiet minute: %v; requests it sent the BMC: %d", err, reqs.Load()-before)
	assert.NoError(t, err, "a healthy host's fence refused because of a dead neighbour's one timed-out read a minute before")
	assert.False(t, errors.Is(err, power.ErrBackoff), "the fence was not even tried (login backed off by a neighbour's old timeout)")
	st, _ := hw.State(ctx)
	assert.Equal(t, power.StateOff, st, "ground truth: blade 1 is still on")
}
