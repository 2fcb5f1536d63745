package redfish_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestConnect_SlowSystemRead (issue 35, review round 19): the direct read
// of the host's system has the whole connect time. A system answering in
// 70 % of it connects; one that never answers while the Systems
// collection does is the host's own failure (power.ErrAfterLogin: a
// Pool backs that host alone off); one that never answers while the
// collection hangs too is the host's own as well since review round 22
// (a chassis that builds its collection by asking every blade hangs it
// while one blade is dead: the login the BMC accepted is not to blame,
// and other hosts of the login use its session). The
// collection is read beside the system's read, after half of the time
// (gofish sends one request at a time on a session: the side read goes
// around it, with the session's token). Ground truth: what the server
// answered, and whether the side read reached it with the token.
func TestConnect_SlowSystemRead(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name         string
		system, list time.Duration // how long each answer takes (0: at once; a minute: hangs)
		ok, own      bool
	}{
		{name: "slow system", system: 700 * time.Millisecond, ok: true},
		{name: "hanging system", system: time.Minute, own: true},
		{name: "hanging service", system: time.Minute, list: time.Minute, own: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", secret)
			b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
			listedWithToken := make(chan bool, 8)
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				delay := time.Duration(0)
				switch {
				case r.Method != http.MethodGet:
				case r.URL.Path == "/redfish/v1/Systems/2":
					delay = tc.system
				case strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems":
					listedWithToken <- r.Header.Get("X-Auth-Token") != ""
					delay = tc.list
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(delay):
				}
				b.ServeHTTP(w, r)
			}))
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "2", Username: "admin", Password: secret, RootCAs: roots})
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if tc.ok {
				require.NoError(t, err)
				_ = c.Close()
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.own, errors.Is(err, power.ErrAfterLogin), "the host's own failure")
			assert.NotErrorIs(t, err, power.ErrAuth)
			select {
			case tok := <-listedWithToken:
				assert.True(t, tok, "the side read of the Systems collection was sent without the session's token")
			default:
				t.Error("the Systems collection was never read beside the hanging system's read")
			}
		})
	}
}
