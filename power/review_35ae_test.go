package power_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// spelledTarget reaches system 1 of the chassis at srv under the
// endpoint spelling endpoint (every connection goes to srv, as DNS and
// the default port would route it), the adapter's windows measured on
// clk.
func spelledTarget(srv *httptest.Server, clk *manualClock, endpoint, login string) power.Target {
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}}
	return power.Target{BMC: endpoint, Config: login, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: endpoint, SystemID: "1", Username: "admin",
			Password: bmcPassword, HTTPClient: hc, Now: clk.Now})
	}}
}

// TestReview35ae_RespelledEndpointForgetsResetWindowPoweringFencedHostOn
// (review round 31): round 30 keeps every reset and press window "per
// endpoint and system for the whole process", so that a host's new
// Controller after Pool.Forget and a new Target still sees them
// (TestReview35ad_ForgottenHostForgetsResetWindowPoweringFencedHostOn).
// The key is the raw Config.Endpoint string (windows.go windowKey,
// command.go:425), while the adapter itself treats "https://x" and
// "https://x/" as the same endpoint (session.go:190, sameEndpoint) and
// the kube controller builds the endpoint from the BareMetalHost's
// address as written ("redfish://bmc/..." and
// "redfish-virtualmedia://bmc:443/..." give "https://bmc" and
// "https://bmc:443", kube/power.go:89). A host fenced with a hard Off
// (ForceOff, answered) whose BMC address is then rewritten to another
// spelling of the same BMC (a driver switched to virtual media, a
// trailing slash, the host name's case) gets a new Controller under a
// key without the reset: a soft Off 5 s later (this firmware's soft
// power-off is a press, reads 20 s stale) reads On, the echo of the
// state before the ForceOff, and presses: the fenced host runs again.
// With the same spelling the press is refused (control). Ground truth:
// the fake hardware.
func TestReview35ae_RespelledEndpointForgetsResetWindowPoweringFencedHostOn(t *testing.T) {
	for i, sp := range []struct{ first, then string }{
		{"https://bmc35ae-%d.test", "https://bmc35ae-%d.test"}, // control
		{"https://bmc35ae-%d.test", "https://bmc35ae-%d.test/"},
		{"https://bmc35ae-%d.test", "https://bmc35ae-%d.test:443"},
		{"https://bmc35ae-%d.test", "https://BMC35AE-%d.test"},
	} {
		first, then := fmt.Sprintf(sp.first, i), fmt.Sprintf(sp.then, i)
		t.Run(then, func(t *testing.T) {
			clk := newClock()
			hw := fake.NewPower(clk.Now, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
			b := redfishtest.NewBMC(clk.Now, hw, "admin", bmcPassword)
			b.Quirks.NoGraceful = true
			srv := b.StartTLS()
			t.Cleanup(srv.Close)
			pool := newPool(t, clk, power.PoolConfig{})
			ctx := context.Background()
			a := pool.Controller("a", spelledTarget(srv, clk, first, "v1"))
			require.NoError(t, a.Off(ctx, power.ModeHard), "the fence: ForceOff")
			require.Equal(t, []string{"ForceOff"}, b.Resets())
			require.False(t, hw.HardwareOn())
			clk.Advance(time.Second)
			pool.Forget("a") // the host's BMC address was rewritten
			a = pool.Controller("a", spelledTarget(srv, clk, then, "v2"))
			clk.Advance(4 * time.Second)
			err := a.Off(ctx, power.ModeSoft)
			t.Logf("%s then %s: soft Off 5 s after the ForceOff: %v; resets %v", first, then, err, b.Resets())
			clk.Advance(time.Minute)
			require.False(t, hw.HardwareOn(),
				"%s then %s (one BMC, one system): ground truth: the host fenced off 5 s before runs again: a press went out on a stale On read (resets %v)", first, then, b.Resets())
		})
	}
}

// staleTarget reaches system 1 of the chassis at srv, the adapter's
// StaleReads stale, its windows measured on clk.
func staleTarget(srv *httptest.Server, clk *manualClock, stale time.Duration, config string) power.Target {
	t := clockTarget(srv, clk, "1", config)
	cp := x509.NewCertPool()
	cp.AddCert(srv.Certificate())
	t.Connect = func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin",
			Password: bmcPassword, RootCAs: cp, Now: clk.Now, StaleReads: stale})
	}
	return t
}

// TestReview35ae_CloseDropsWindowTheNextControllerStillNeeds (review
// round 31, Low): the adapter's windows are "each measured both with the
// settings of the Controller that opened it and with those of the one
// that checks it", but a Controller's Close drops the system's record
// as soon as its windows ended by the settings it was noted with
// (windows.go dropEnded, redfish.go:675). An operator who saw the BMC's
// reads 20 s stale raises StaleReads from 5 s to 30 s: the Pool Forgets
// the host and makes its Controller with the new Target 1 s after a
// fence's ForceOff ended the old 5 s window; the new Controller, whose
// own setting puts a soft Off (a press on this firmware) 7 s after the
// ForceOff inside its window, finds no record, reads On (the echo of the
// state before the ForceOff) and presses: the fenced host runs again.
// Control: the same new Target for a second host name of the same
// system, with the first not forgotten (its record still there), is
// refused.
func TestReview35ae_CloseDropsWindowTheNextControllerStillNeeds(t *testing.T) {
	for _, forget := range []bool{false, true} {
		clk := newClock()
		hw := fake.NewPower(clk.Now, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
		b := redfishtest.NewBMC(clk.Now, hw, "admin", bmcPassword)
		b.Quirks.NoGraceful = true
		srv := b.StartTLS()
		t.Cleanup(srv.Close)
		pool := newPool(t, clk, power.PoolConfig{})
		ctx := context.Background()
		a := pool.Controller("a", staleTarget(srv, clk, 5*time.Second, "stale=5s"))
		require.NoError(t, a.Off(ctx, power.ModeHard), "the fence: ForceOff")
		require.False(t, hw.HardwareOn())
		clk.Advance(6 * time.Second)
		name := "a2"
		if forget {
			pool.Forget("a") // StaleReads raised: a new Target
			name = "a"
		}
		a2 := pool.Controller(name, staleTarget(srv, clk, 30*time.Second, "stale=30s"))
		clk.Advance(time.Second)
		err := a2.Off(ctx, power.ModeSoft)
		t.Logf("forget=%v: soft Off 7 s after the ForceOff under StaleReads 30 s: %v; resets %v", forget, err, b.Resets())
		clk.Advance(time.Minute)
		require.False(t, hw.HardwareOn(),
			"forget=%v: ground truth: the host fenced off 7 s before runs again: a press went out inside the new Controller's own StaleReads (resets %v)", forget, b.Resets())
	}
}
