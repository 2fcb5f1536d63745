package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_RequestPathHeadersNotGofishs (review round 21, issue 35;
// round 20's power/redfish/path.go: reqPath.do "sends one request as
// gofish would (the same headers ...)"). gofish, made with
// ReuseConnections (as the adapter makes it), sends "Connection:
// keep-alive" on every request; the Controller's own request path does
// not, so the login (gofish) and every later read and reset (reqPath)
// differ in their headers, against the documented claim (a BMC that keeps
// HTTP/1.x connections alive only when asked would now cost a TCP and
// TLS handshake per read; not shown against a real BMC). Ground truth:
// the headers the BMC received, by request.
func TestReview35_RequestPathHeadersNotGofishs(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw")
	var mu sync.Mutex
	got := map[string][]string{} // "METHOD path" -> header names
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			if k != "X-Auth-Token" && k != "Content-Length" && k != "Accept-Encoding" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		mu.Lock()
		got[r.Method+" "+strings.TrimSuffix(r.URL.Path, "/")] = names
		mu.Unlock()
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.State(ctx)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	byGofish := got["GET /redfish/v1"]         // the service root, read by gofish's login
	byPath := got["GET /redfish/v1/Systems/1"] // the system, read on the request path
	t.Logf("gofish: %v; request path: %v", byGofish, byPath)
	require.NotEmpty(t, byGofish)
	assert.Equal(t, byGofish, byPath, "the request path's headers are not gofish's")
}
