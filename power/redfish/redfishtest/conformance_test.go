package redfishtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const password = "conformance-Pw1"

type server struct {
	bmc *redfishtest.BMC
	srv *httptest.Server
	hw  *fake.Power
}

func start(t *testing.T) *server {
	t.Helper()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", password)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	return &server{bmc: b, srv: srv, hw: hw}
}

// do sends method path with basic authentication (unless anonymous) and
// the given headers, and returns the answer with its body read.
func (s *server) do(t *testing.T, method, path string, anonymous bool, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	require.NoError(t, err)
	if !anonymous {
		req.SetBasicAuth("admin", password)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(raw)
}

// TestMethodNotAllowedWithAllow: a method a resource does not support is
// 405 with an Allow header (DSP0266), not 404 (Protocol Validator).
func TestMethodNotAllowedWithAllow(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		method, path, allow string
		anonymous           bool
	}{
		{http.MethodDelete, "/redfish/v1/", "GET, HEAD", true},
		{http.MethodPatch, "/redfish/v1/", "GET, HEAD", true},
		{http.MethodPost, "/redfish/v1/", "GET, HEAD", true},
		{http.MethodPut, "/redfish", "GET, HEAD", true},
		{http.MethodDelete, "/redfish/v1/Systems", "GET, HEAD", false},
		{http.MethodPost, "/redfish/v1/Systems/1", "GET, HEAD", false},
		{http.MethodDelete, "/redfish/v1/SessionService", "GET, HEAD", false},
		{http.MethodPatch, "/redfish/v1/SessionService/Sessions", "GET, HEAD, POST", false},
		{http.MethodGet, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", "POST", false},
	} {
		resp, _ := s.do(t, tc.method, tc.path, tc.anonymous, "")
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	resp, _ := s.do(t, http.MethodDelete, "/redfish/v1/Systems", true, "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a protected resource asks for credentials first")
	resp, _ = s.do(t, http.MethodGet, "/redfish/v1/Nothing", false, "")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestHeadAndGetHeaders: HEAD is served wherever GET is, without a body;
// GET and HEAD answers carry Allow and Cache-Control, and the service root,
// Systems and Sessions a Link to their schema with rel=describedby.
func TestHeadAndGetHeaders(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		path      string
		anonymous bool
		described bool
	}{
		{"/redfish", true, false},
		{"/redfish/v1/", true, true},
		{"/redfish/v1/odata", true, false},
		{"/redfish/v1/$metadata", true, false},
		{"/redfish/v1/Systems", false, true},
		{"/redfish/v1/Systems/1", false, true},
		{"/redfish/v1/SessionService", false, true},
		{"/redfish/v1/SessionService/Sessions", false, true},
		{"/redfish/v1/JsonSchemas", false, false},
		{"/redfish/v1/Registries", false, false},
	} {
		get, body := s.do(t, http.MethodGet, tc.path, tc.anonymous, "")
		require.Equal(t, http.StatusOK, get.StatusCode, tc.path)
		assert.NotEmpty(t, body, tc.path)
		head, hbody := s.do(t, http.MethodHead, tc.path, tc.anonymous, "")
		require.Equal(t, http.StatusOK, head.StatusCode, "HEAD %s", tc.path)
		assert.Empty(t, hbody, "HEAD %s has a body", tc.path)
		for _, r := range []*http.Response{get, head} {
			assert.Contains(t, r.Header.Get("Allow"), "GET", tc.path)
			assert.Contains(t, r.Header.Get("Allow"), "HEAD", tc.path)
			assert.Equal(t, "no-cache", r.Header.Get("Cache-Control"), tc.path)
			if tc.described {
				assert.Regexp(t, `^<http://redfish\.dmtf\.org/schemas/v1/[A-Za-z0-9_.]+\.json>; rel=describedby$`, r.Header.Get("Link"), tc.path)
			}
		}
	}
}

// TestUnsupportedODataVersion: a request with an OData-Version the service
// does not speak is 412 Precondition Failed.
func TestUnsupportedODataVersion(t *testing.T) {
	s := start(t)
	resp, _ := s.do(t, http.MethodGet, "/redfish/v1/", true, "", "OData-Version", "5.0")
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	resp, _ = s.do(t, http.MethodGet, "/redfish/v1/", true, "", "OData-Version", "4.0")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestSessionsByMembersAndRootLinks: POST to Sessions/Members creates a
// session as POST to the collection does (iLOrest logs in that way), and
// the service root links JsonSchemas and Registries, which iLOrest
// requires.
func TestSessionsByMembersAndRootLinks(t *testing.T) {
	s := start(t)
	for _, path := range []string{"/redfish/v1/SessionService/Sessions", "/redfish/v1/SessionService/Sessions/Members"} {
		resp, _ := s.do(t, http.MethodPost, path, true, `{"UserName":"admin","Password":"`+password+`"}`)
		require.Equal(t, http.StatusCreated, resp.StatusCode, path)
		assert.NotEmpty(t, resp.Header.Get("X-Auth-Token"))
		assert.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/redfish/v1/SessionService/Sessions/"))
		resp, _ = s.do(t, http.MethodPost, path, true, `{"UserName":"admin","Password":"wrong"}`)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}
	assert.Equal(t, 2, s.bmc.Sessions())
	assert.Equal(t, 4, s.bmc.Logins())

	_, body := s.do(t, http.MethodGet, "/redfish/v1/", true, "")
	var root map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &root))
	for _, k := range []string{"JsonSchemas", "Registries"} {
		l, ok := root[k].(map[string]any)
		require.True(t, ok, "the service root links %s", k)
		resp, _ := s.do(t, http.MethodGet, l["@odata.id"].(string), false, "")
		assert.Equal(t, http.StatusOK, resp.StatusCode, k)
	}
}

// TestSessionTokensUnpredictable: session tokens come from crypto/rand:
// two BMCs on the same clock hand out different tokens of at least 128
// bits (they were "token-<n>-<clock>", guessable from the time of login).
func TestSessionTokensUnpredictable(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	var tokens []string
	for range 2 {
		b := redfishtest.NewBMC(clock, fake.NewPower(clock, fake.PowerConfig{}), "admin", password)
		srv := b.StartTLS()
		s := &server{bmc: b, srv: srv}
		resp, _ := s.do(t, http.MethodPost, "/redfish/v1/SessionService/Sessions", true, `{"UserName":"admin","Password":"`+password+`"}`)
		srv.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		tok := resp.Header.Get("X-Auth-Token")
		assert.GreaterOrEqual(t, len(tok), 26, "base32 of 128 bits")
		assert.NotContains(t, tok, "1767225600", "the clock shows in the token")
		tokens = append(tokens, tok)
	}
	assert.NotEqual(t, tokens[0], tokens[1])
}

// TestSystemIDOnMultiSystemService: on a BMC with several systems the
// adapter controls the one named by SystemID and no other; without one it
// refuses, naming how many there are.
func TestSystemIDOnMultiSystemService(t *testing.T) {
	s := start(t)
	blade := fake.NewPower(time.Now, fake.PowerConfig{})
	s.bmc.AddSystem("Blade-2", blade)
	roots := s.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	ctx := context.Background()
	_, err := redfish.Connect(ctx, redfish.Config{Endpoint: s.srv.URL, Username: "admin", Password: password, RootCAs: roots})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 system")

	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: s.srv.URL, Username: "admin", Password: password, RootCAs: roots, SystemID: "Blade-2"})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.False(t, blade.HardwareOn(), "the named system is off")
	assert.True(t, s.hw.HardwareOn(), "the other system is untouched")
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOff, st)

	_, body := s.do(t, http.MethodGet, "/redfish/v1/Systems", false, "")
	assert.Contains(t, body, `"Members@odata.count":2`)
}
