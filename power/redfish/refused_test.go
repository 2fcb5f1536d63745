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

// refusingBMC serves the emulator with BasicAuth; deny makes system 1's
// resources answer 401 (a per-blade privilege). It logs the paths of the
// requests answered 401 (ground truth: what the BMC refused).
type refusingBMC struct {
	b     *redfishtest.BMC
	srv   *httptest.Server
	roots *x509.CertPool
	deny  atomic.Bool
	mu    sync.Mutex
	r401  []string
}

func newRefusingBMC(t *testing.T) *refusingBMC {
	t.Helper()
	rb := &refusingBMC{b: redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw-right")}
	rb.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rb.deny.Load() && r.URL.Path == "/redfish/v1/Systems/1" {
			rb.log(r.URL.Path)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rec := httptest.NewRecorder()
		rb.b.ServeHTTP(rec, r)
		if rec.Code == http.StatusUnauthorized {
			rb.log(r.URL.Path)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(rb.srv.Close)
	rb.roots = x509.NewCertPool()
	rb.roots.AddCert(rb.srv.Certificate())
	return rb
}

func (rb *refusingBMC) log(p string) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.r401 = append(rb.r401, p)
}

func (rb *refusingBMC) refused() []string {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return append([]string(nil), rb.r401...)
}

func (rb *refusingBMC) connect(ctx context.Context) (*redfish.Controller, error) {
	return redfish.Connect(ctx, redfish.Config{Endpoint: rb.srv.URL, SystemID: "1", Username: "admin", Password: "pw-right", RootCAs: rb.roots, BasicAuth: true})
}

// TestBasicAuthSystem401CheckedOnSessionService: with BasicAuth and
// power.CallInfo.CheckRefusal, a 401 to a call's read of the system is
// checked on the SessionService and the Systems collection: answered,
// the refusal is the system's (power.ErrSystemRefused, not
// power.ErrAuth); refused too (the password rotated), power.ErrAuth and
// the check's verdict (CallInfo.Check) is power.CredentialsRefused, once;
// without CheckRefusal no check is sent and the 401 is power.ErrAuth.
// Connect's read of the system gets the same check (power.AfterLogin).
func TestBasicAuthSystem401CheckedOnSessionService(t *testing.T) {
	rb := newRefusingBMC(t)
	ctx := context.Background()
	c, err := rb.connect(ctx)
	require.NoError(t, err)
	defer c.Close()
	var checksRefused atomic.Int32
	check := power.WithCallInfo(ctx, power.CallInfo{CheckRefusal: true, Check: func(ctx context.Context, read func(context.Context) power.Verdict) power.Verdict {
		v := read(ctx)
		if v == power.CredentialsRefused {
			checksRefused.Add(1)
		}
		return v
	}})

	rb.deny.Store(true)
	_, err = c.State(check)
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrSystemRefused)
	assert.NotErrorIs(t, err, power.ErrAuth, "the BMC answers these credentials")
	assert.Equal(t, []string{"/redfish/v1/Systems/1"}, rb.refused(), "one refused request: the SessionService answered")

	_, err = c.State(ctx) // no CallInfo: no check
	assert.ErrorIs(t, err, power.ErrAuth)
	assert.NotErrorIs(t, err, power.ErrSystemRefused)
	assert.Len(t, rb.refused(), 2, "no check without CheckRefusal")

	_, err = rb.connect(check)
	assert.ErrorIs(t, err, power.ErrSystemRefused)
	assert.ErrorIs(t, err, power.ErrAfterLogin, "Connect's refusal of the system is the host's own")
	assert.NotErrorIs(t, err, power.ErrAuth)

	rb.deny.Store(false)
	rb.b.SetCredentials("admin", "pw-rotated")
	before := len(rb.refused())
	_, err = c.State(check)
	assert.ErrorIs(t, err, power.ErrAuth, "the SessionService refused the credentials too")
	assert.NotErrorIs(t, err, power.ErrSystemRefused)
	assert.Equal(t, []string{"/redfish/v1/Systems/1", "/redfish/v1/SessionService"}, rb.refused()[before:], "the read and its one check")
	assert.EqualValues(t, 1, checksRefused.Load(), "the refused check is reported")
}
