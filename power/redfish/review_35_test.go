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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview35_LogoutFollowsLocationOffOrigin: a BMC answers a login with
// a session Location that is not a path ("@other-host:port/…"). gofish
// keeps it as is when it does not parse as a request URI and prefixes the
// endpoint to it, so the logout is "DELETE https://<bmc>@<other>/…": the
// session token goes to another origin, which the redirect check never
// sees (no redirect is involved). The doc: "Credentials never leave the
// endpoint's origin: … the session token … go nowhere else".
func TestReview35_LogoutFollowsLocationOffOrigin(t *testing.T) {
	var mu sync.Mutex
	var got []string
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" token="+r.Header.Get("X-Auth-Token"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	otherHost := strings.TrimPrefix(other.URL, "https://")

	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", secret)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/redfish/v1/SessionService/Sessions" {
			rec := httptest.NewRecorder()
			b.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			if loc := rec.Header().Get("Location"); loc != "" {
				w.Header().Set("Location", "@"+otherHost+loc)
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate()) // httptest's certificate: 127.0.0.1, as a real CA would sign any name

	c, err := redfish.Connect(context.Background(), redfish.Config{Endpoint: srv.URL, Username: "admin", Password: secret, RootCAs: roots})
	require.NoError(t, err)
	tokens := b.Tokens()
	require.Len(t, tokens, 1)
	require.NoError(t, c.Close())
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		assert.NotContains(t, g, tokens[0], "the BMC's session token was sent to another origin: %s", g)
	}
	assert.Empty(t, got, "requests reached another origin than the endpoint's")
}

// TestReview35_BasicAuthFollowsResetTargetOffOrigin: the same root cause
// for a link in the BMC's JSON: a Reset target "@other-host:port/…" is
// prefixed with the endpoint, and the reset (with BasicAuth: the
// Authorization header, that is the password) is posted to another origin.
func TestReview35_BasicAuthFollowsResetTargetOffOrigin(t *testing.T) {
	var mu sync.Mutex
	var got []string
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	otherHost := strings.TrimPrefix(other.URL, "https://")
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", secret)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/1" {
			rec := httptest.NewRecorder()
			b.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			body := strings.ReplaceAll(rec.Body.String(), `"target":"/redfish`, `"target":"@`+otherHost+`/redfish`)
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write([]byte(body))
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := redfish.Connect(context.Background(), redfish.Config{Endpoint: srv.URL, Username: "admin", Password: secret, BasicAuth: true, RootCAs: roots, SystemID: "1"})
	require.NoError(t, err)
	defer c.Close()
	offErr := c.Off(context.Background(), 1) // hard: ForceOff, sent whatever the read says
	if offErr == nil {
		assert.NotEmpty(t, b.Resets(), "Off reported success, but the BMC never received the reset")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, got, "requests with the BMC's credentials reached another origin than the endpoint's")
}
