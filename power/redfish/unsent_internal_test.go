package redfish

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview35_PressNeverHandedOverIsNoLostReset (issue 35 review round
// 20, the adapter's side of TestReview35_UnsentPressBlocksPressesForMinutes):
// a press (PushPowerButton: the system lists no GracefulShutdown) whose
// POST waits for the Controller's request slot until its deadline was
// never handed to the HTTP client: nothing reached the BMC. Its error
// matches power.ErrNotSent, and it opens no lost-reset window: a press a
// minute later (past StaleReads) goes out. Before, the adapter noted the
// reset before the POST and, the POST getting no answer, held every press
// of the system back for LostLanding + SoftTimeout + StaleReads (6.5
// min). The slot is taken, deterministically, by the test while the
// press's state read holds it. Ground truth: the emulator's reset log.
func TestReview35_PressNeverHandedOverIsNoLostReset(t *testing.T) {
	t.Cleanup(ResetLostWindows36m)
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw-unsent")
	b.Quirks.NoGraceful = true
	var armed atomic.Bool
	reading := make(chan struct{}, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if armed.Load() && r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/1" {
			armed.Store(false)
			reading <- struct{}{}
			time.Sleep(50 * time.Millisecond) // the test is queued for the slot by now
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	ctx := context.Background()
	c, err := Connect(ctx, Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw-unsent", RootCAs: roots, Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, c.TogglesOff(power.ModeSoft))

	armed.Store(true)
	first := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		first <- c.Off(cctx, power.ModeSoft)
	}()
	<-reading
	c.creqs <- struct{}{} // queued behind the read: the press's POST waits behind it (a command's slot)
	err = <-first
	<-c.creqs
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrNotSent, "a press never handed over: %v", err)
	require.Empty(t, b.Resets(), "no press reached the BMC")

	offset.Store(int64(time.Minute)) // past StaleReads
	err = c.Off(ctx, power.ModeSoft)
	assert.NoError(t, err, "a press that never left holds the next one back")
	assert.Equal(t, []string{"PushPowerButton"}, b.Resets())
}
