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
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview39_PressResentAfterReloginOnStaleRead (review 39 round 14):
// the round-13 fix re-runs OnChecked's check after the re-login that
// follows a reset POST refused 401, because an answer of the BMC's (the
// login) then lies between what was checked and the command. The same
// POST retry in postReset/withSession also carries the toggle, whose
// safety rests on the same kind of premise: "A toggle is only safe when
// a fresh read says the host is in the opposite state" (change). A soft
// power-off on a BMC with no Graceful types (HPE iLO 5) is a press of
// PushPowerButton, sent because the state read On; the session expired,
// so the BMC answers the press 401 and applies nothing; the adapter logs
// in again (a BMC slow to answer a login: 300 ms here, seconds in the
// field) and presses again on that read of On, now stale, with no read
// after the login. The host went off meanwhile (its OS halted, an
// administrator or another tool powered it off), so the press powers it
// ON: a power-off call that powers a host on. Ground truth: the
// emulator's hardware (fake.Power: on after the call, an Off->On
// transition after it went off) and its reset log. Correct: a toggle
// retried after the re-login is preceded by a fresh read (the press goes
// out only if that read is still the opposite state, and the
// resetQuiet/lastOffPush windows are checked again), or the refused
// press is returned unsent (power.ErrNotSent) for the caller to decide
// on a new read.
func TestReview39_PressResentAfterReloginOnStaleRead(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	b.Quirks.NoGraceful = true
	var mu sync.Mutex
	// expired: the next reset POST is refused 401; expiredOnce: it was
	// armed (the slow login is the re-login after that refusal, not
	// Connect's).
	expired, expiredOnce := false, false
	wentOff := time.Time{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		exp := expired
		reset := r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset")
		login := r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/Sessions")
		if exp && reset {
			expired = false // the session is gone: this press is refused, nothing applied
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.NoValidSession","message":"the session expired"}}`))
			return
		}
		slow := login && !exp && wentOff.IsZero() && b.Resets() == nil && expiredOnce
		if slow {
			// While the BMC is slow to answer the login, the host goes
			// off by itself.
			hw.OutOfBandOff()
			wentOff = time.Now()
		}
		mu.Unlock()
		if slow {
			time.Sleep(300 * time.Millisecond)
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: roots})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, c.TogglesOff(power.ModeSoft), "premise: a soft power-off is a press here")
	require.True(t, hw.HardwareOn(), "premise: the host runs")

	mu.Lock()
	expired, expiredOnce = true, true
	mu.Unlock()
	err = c.Off(ctx, power.ModeSoft)
	mu.Lock()
	off := wentOff
	mu.Unlock()
	require.False(t, off.IsZero(), "premise: the press was refused 401 and a re-login followed (err %v, resets %v)", err, b.Resets())
	var onAfter []time.Time
	for _, tr := range hw.Transitions() {
		if tr.To == power.StateOn && tr.At.After(off) {
			onAfter = append(onAfter, tr.At)
		}
	}
	assert.Empty(t, onAfter,
		"a power-off call powered the host on: its press, refused 401, was sent again after the re-login on the read of On taken "+
			"before it, while the host had gone off (err %v; resets %v; transitions %+v)", err, b.Resets(), hw.Transitions())
	assert.False(t, hw.HardwareOn(), "the host that went off is left off by a power-off call")
}
