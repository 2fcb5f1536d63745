package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview35ap_CheckTakesAnyAnswerForCredentialsProof (review 35ap;
// power/redfish doc: the SessionService check "needs the credentials";
// answered 2xx "the BMC refuses this system only"; issue 35 item 1 and
// the package doc's "a BMC with a wrong password sees at most two
// logins a minute"). The password was rotated on the BMC: the emulator
// refuses the credentials everywhere (ground truth: its own 401 to the
// system read). The check of that 401 is answered by something that is
// not an authenticated SessionService answer: a 200 HTML login page (a
// BMC web UI's answer to an unauthenticated request), a same-origin 302
// to the public service root, a SessionService served to anyone (a BMC
// that does not protect it). refusedHere (refused.go:50) takes any 2xx
// for proof that the credentials work: the rotated password's refusal
// becomes power.ErrSystemRefused, which a Pool treats as the host's own
// and as a success of the credentials (pool_call.go release:
// succeededLocked), so every host of the chassis keeps sending the
// rotated password on its own schedule.
func TestReview35ap_CheckTakesAnyAnswerForCredentialsProof(t *testing.T) {
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"html-200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("<html><body>Please log in</body></html>"))
		}},
		{"redirect-to-public-root", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/redfish/v1/", http.StatusFound)
		}},
		{"unprotected-json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("OData-Version", "4.0")
			_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/SessionService","@odata.type":"#SessionService.v1_1_8.SessionService","Id":"SessionService","Name":"Session Service","ServiceEnabled":true}`))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw-right")
			var mu sync.Mutex
			var refusedSystem int
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/redfish/v1/SessionService" {
					tc.serve(w, r)
					return
				}
				rec := httptest.NewRecorder()
				b.ServeHTTP(rec, r)
				if rec.Code == http.StatusUnauthorized && r.URL.Path == "/redfish/v1/Systems/1" {
					mu.Lock()
					refusedSystem++
					mu.Unlock()
				}
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
			}))
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			ctx := context.Background()
			c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw-right", RootCAs: roots, BasicAuth: true})
			require.NoError(t, err)
			defer c.Close()

			b.SetCredentials("admin", "pw-rotated")
			check := power.WithCallInfo(ctx, power.CallInfo{CheckRefusal: true})
			_, err = c.State(check)
			mu.Lock()
			n := refusedSystem
			mu.Unlock()
			require.Equal(t, 1, n, "ground truth: the emulator refused the rotated credentials on the system")
			assert.ErrorIs(t, err, power.ErrAuth, "the BMC refuses these credentials (rotated): %v", err)
			assert.NotErrorIs(t, err, power.ErrSystemRefused, "an unauthenticated answer taken for proof that the credentials work")
		})
	}
}

// TestReview35ap_CheckCancelledByCallerBlamesCredentials (review 35ap; issue
// 35 item 3 "caller cancellation is not the BMC's fault"; power/redfish
// doc "checked once ... bounded by the call's context"). A per-blade 401
// (the credentials work: the emulator answers them) whose check is
// answered only after the caller's context ended: the error is
// power.ErrAuth, the credentials' refusal, although nothing refused
// them: the caller's cancel decides whether the neighbours back off.
func TestReview35ap_CheckCancelledByCallerBlamesCredentials(t *testing.T) {
	rb := newRefusingBMC(t)
	ctx := context.Background()
	c, err := rb.connect(ctx)
	require.NoError(t, err)
	defer c.Close()
	rb.deny.Store(true)
	release := make(chan struct{})
	defer close(release)
	old := rb.srv.Config.Handler
	rb.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redfish/v1/SessionService" {
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}
		old.ServeHTTP(w, r)
	})
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err = c.State(power.WithCallInfo(cctx, power.CallInfo{CheckRefusal: true}))
	require.Error(t, err)
	assert.Equal(t, []string{"/redfish/v1/Systems/1"}, rb.refused(), "ground truth: only the system was refused; the credentials were never refused")
	assert.NotErrorIs(t, err, power.ErrAuth, "a caller's cancel during the check turns one blade's 401 into the credentials' refusal: %v", err)
}

// TestReview35ap_CheckRedirectOffOriginSendsNoCredentials (review 35ap;
// issue 35 item 7; passing, coverage): the check's read of the
// SessionService answered 307 to another origin sends nothing there
// (ground truth: the other server's own log), and the 401 stays
// power.ErrAuth (the check did not answer).
func TestReview35ap_CheckRedirectOffOriginSendsNoCredentials(t *testing.T) {
	var other atomic.Int32
	var sawAuth atomic.Bool
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer evil.Close()
	rb := newRefusingBMC(t)
	ctx := context.Background()
	c, err := rb.connect(ctx)
	require.NoError(t, err)
	defer c.Close()
	old := rb.srv.Config.Handler
	rb.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redfish/v1/SessionService" {
			http.Redirect(w, r, evil.URL+"/redfish/v1/SessionService", http.StatusTemporaryRedirect)
			return
		}
		old.ServeHTTP(w, r)
	})
	rb.deny.Store(true)
	_, err = c.State(power.WithCallInfo(ctx, power.CallInfo{CheckRefusal: true}))
	assert.Zero(t, other.Load(), "requests sent to another origin")
	assert.False(t, sawAuth.Load(), "credentials sent to another origin")
	assert.NotErrorIs(t, err, power.ErrSystemRefused, "an off-origin redirect is no answer")
}
