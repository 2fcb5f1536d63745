package redfish_test

import (
	"context"
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

// TestReview35ah_IdeographicFullStopSplitsPressWindow (endpoint.go
// Origin: "its scheme and host name lower-cased (a trailing dot
// dropped)", "Two spellings of one BMC ... give one origin, so that one
// BMC is one endpoint to the window registry"; "A host name that is not
// ASCII is written in its ASCII ... form by the IDNA conversion net/http
// applies when it dials"): canonical drops a trailing '.' BEFORE the IDNA
// mapping (endpoint.go: hostASCII(strings.TrimSuffix(host, "."))), and
// idna.Lookup maps the other label separators (U+3002 IDEOGRAPHIC FULL
// STOP, U+FF0E FULLWIDTH FULL STOP, U+FF61) to '.', so
// "http://bmc1.example。" has the origin "http://bmc1.example." while
// "http://bmc1.example." and "http://bmc1.example" have
// "http://bmc1.example": net/http dials all three as the same name
// (idnaASCII gives "bmc1.example."), yet the window registry holds two
// BMCs. A ForceOff fence by the first spelling's Controller opens no
// window for the second's, whose soft Off 5 s later reads a stale On and
// presses the button: the fenced host runs again. Ground truth: the fake
// hardware. The dialer sends every name to the one emulator (as DNS
// would: the names are one).
func TestReview35ah_IdeographicFullStopSplitsPressWindow(t *testing.T) {
	for _, second := range []string{"bmc1.example.", "bmc1.example\u3002", "bmc1.example\uff0e"} {
		t.Run(second, func(t *testing.T) {
			clk := fake.NewClock(time.Time{})
			hw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
			b := redfishtest.NewBMC(clk.Real, hw, "admin", secret)
			b.Quirks.NoGraceful = true // soft off is a press
			srv := httptest.NewServer(b)
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			_, port, _ := net.SplitHostPort(addr)
			tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
			hc := &http.Client{Transport: tr}
			epA := "http://bmc1.example:" + port
			epB := "http://" + second + ":" + port
			t.Cleanup(func() { redfish.ForgetWindowsOf(epA); redfish.ForgetWindowsOf(epB) })
			cfg := redfish.Config{Endpoint: epA, SystemID: "1", Username: "admin", Password: secret, HTTPClient: hc, Now: clk.Real}
			cA, err := redfish.Connect(context.Background(), cfg)
			require.NoError(t, err)
			require.NoError(t, cA.Off(ctx, power.ModeHard), "the fence: ForceOff")
			require.False(t, hw.HardwareOn())
			_ = cA.Close()
			clk.Advance(5 * time.Second)
			cfg.Endpoint = epB
			cB, err := redfish.Connect(context.Background(), cfg)
			if second == "//~bmc1" {
				// Amended (fixer t35h): the '//' spelling is refused
				// (ErrConfig, "write the path with single slashes"):
				// it names one BMC only behind a slash-merging proxy,
				// so it is no second spelling of anything, and no
				// second Controller exists to press.
				require.ErrorIs(t, err, redfish.ErrConfig, "%s", epB)
				require.Contains(t, err.Error(), "single slashes")
			} else {
				require.NoError(t, err, "%s reaches the same BMC", epB)
				err = cB.Off(ctx, power.ModeSoft)
				_ = cB.Close()
			}
			oA, _ := redfish.Origin(epA)
			oB, _ := redfish.Origin(epB)
			t.Logf("second spelling %q (origin %s vs %s): soft Off 5 s after the ForceOff: %v; resets %v", epB, oA, oB, err, b.Resets())
			clk.Advance(time.Minute)
			require.False(t, hw.HardwareOn(),
				"ground truth: the host fenced off 5 s before runs again: a press went out on a stale On read because Origin split one BMC in two (%s vs %s); resets %v",
				oA, oB, b.Resets())
		})
	}
}

// TestReview35ah_DoubleSlashSpellingSplitsPressWindow (redfish.go's doc:
// the windows are shared "by every Controller of the process for the same
// Endpoint (by its Origin: every spelling of one BMC ... is one)";
// plainPath: a path accepted must name "one resource whatever the server
// or a proxy in front of it makes of it"): a BMC behind a path proxy that
// merges slashes (nginx's default merge_slashes; newProxied35ag cleans
// the path as nginx does) is reached as https://proxy/~bmc1 and as
// https://proxy//~bmc1 (an inventory's base URL joined with a "/bmc1"
// of its own). Origin keeps the empty segment, so the registry holds two
// BMCs: the first spelling's ForceOff fence opens no window for the
// second's soft Off 5 s later, which reads a stale On and presses the
// fenced host back on. Ground truth: the fake hardware. Control: the
// trailing-slash spelling (which Origin does merge) keeps the host off.
func TestReview35ah_DoubleSlashSpellingSplitsPressWindow(t *testing.T) {
	for _, second := range []string{"/~bmc1/", "//~bmc1"} {
		t.Run(second, func(t *testing.T) {
			clk := fake.NewClock(time.Time{})
			hw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
			b := redfishtest.NewBMC(clk.Real, hw, "admin", secret)
			b.Quirks.NoGraceful = true // soft off is a press
			other := redfishtest.NewBMC(clk.Real, fake.NewPower(clk.Real, fake.PowerConfig{}), "admin", secret)
			p := newProxied35ag(t, b, other)
			epA, epB := p.srv.URL+"/~bmc1", p.srv.URL+second
			t.Cleanup(func() { redfish.ForgetWindowsOf(epA); redfish.ForgetWindowsOf(epB) })
			cfg := redfish.Config{Endpoint: epA, SystemID: "1", Username: "admin", Password: secret, RootCAs: p.pool, Now: clk.Real}
			cA, err := redfish.Connect(context.Background(), cfg)
			require.NoError(t, err)
			require.NoError(t, cA.Off(ctx, power.ModeHard), "the fence: ForceOff")
			require.False(t, hw.HardwareOn())
			_ = cA.Close()
			clk.Advance(5 * time.Second)
			cfg.Endpoint = epB
			cB, err := redfish.Connect(context.Background(), cfg)
			if second == "//~bmc1" {
				// Amended (fixer t35h): the '//' spelling is refused
				// (ErrConfig, "write the path with single slashes"):
				// it names one BMC only behind a slash-merging proxy,
				// so it is no second spelling of anything, and no
				// second Controller exists to press.
				require.ErrorIs(t, err, redfish.ErrConfig, "%s", epB)
				require.Contains(t, err.Error(), "single slashes")
			} else {
				require.NoError(t, err, "%s reaches the same BMC", epB)
				err = cB.Off(ctx, power.ModeSoft)
				_ = cB.Close()
			}
			oA, _ := redfish.Origin(epA)
			oB, _ := redfish.Origin(epB)
			t.Logf("second spelling %s (origin %s vs %s): soft Off 5 s after the ForceOff: %v; resets %v", epB, oA, oB, err, b.Resets())
			clk.Advance(time.Minute)
			require.False(t, hw.HardwareOn(),
				"ground truth: the host fenced off 5 s before runs again: a press went out on a stale On read because Origin split one BMC in two (%s vs %s); resets %v",
				oA, oB, b.Resets())
		})
	}
}
