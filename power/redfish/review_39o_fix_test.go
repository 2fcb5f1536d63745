package redfish_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestReview39o_ResetResentAfterReloginOnStaleRead: the restart's
// counterpart of TestReview39_PressResentAfterReloginOnStaleRead. A
// ForceRestart is sent only on a fresh read of On (a restart of a system
// that is off powers it on on some BMCs); refused 401, it was posted
// again after a slow re-login on the read taken before it, while the
// host had gone off. Correct: the retry is preceded by a fresh read, and
// the restart is returned unsent (power.ErrNotSent). Ground truth: the
// emulator's reset log.
func TestReview39o_ResetResentAfterReloginOnStaleRead(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	var mu sync.Mutex
	expired, armed := false, false
	wentOff := time.Time{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reset := r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset")
		login := r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/Sessions")
		if expired && reset {
			expired = false
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.NoValidSession","message":"the session expired"}}`))
			return
		}
		slow := login && armed && !expired && wentOff.IsZero()
		if slow {
			hw.OutOfBandOff()
			wentOff = time.Now()
		}
		mu.Unlock()
		if slow {
			time.Sleep(100 * time.Millisecond)
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
	require.True(t, hw.HardwareOn(), "premise: the host runs")

	mu.Lock()
	expired, armed = true, true
	mu.Unlock()
	err = c.Reset(ctx)
	mu.Lock()
	off := wentOff
	mu.Unlock()
	require.False(t, off.IsZero(), "premise: the restart was refused 401 and a re-login followed (err %v)", err)
	assert.Empty(t, b.Resets(), "a restart was posted after the re-login on the read of On taken before it, while the host had gone off")
	assert.True(t, errors.Is(err, power.ErrNotSent), "the refused restart is returned unsent: %v", err)
	assert.False(t, hw.HardwareOn(), "the host that went off is left off")
}

// TestReview39o_AcceptedOnNamesItsTask: a power-on answered 202 with a
// task monitor (Location) is noted with that monitor
// (power.Queued.Monitor), and Queued.TaskEnded reads it on the session:
// not ended while it answers 202 Running, ended once it says Completed.
func TestReview39o_AcceptedOnNamesItsTask(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(context.Background(), power.ModeHard))
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	const monitor = "/redfish/v1/TaskService/TaskMonitors/9"
	var done atomic.Bool
	var gets atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == monitor {
			gets.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if done.Load() {
				_, _ = w.Write([]byte(`{"TaskState":"Completed"}`))
				return
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"TaskState":"Running"}`))
			return
		}
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
			w.Header().Set("Location", monitor)
			w.WriteHeader(http.StatusAccepted)
			return
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
	var q power.Queued
	require.NoError(t, c.On(power.WithQueued(ctx, &q)))
	assert.True(t, q.Queued())
	assert.Equal(t, monitor, q.Monitor())
	ended, err := q.TaskEnded(ctx)
	require.NoError(t, err)
	assert.False(t, ended, "Running")
	done.Store(true)
	ended, err = q.TaskEnded(ctx)
	require.NoError(t, err)
	assert.True(t, ended, "Completed")
	assert.Equal(t, int32(2), gets.Load(), "read on the BMC")
}
