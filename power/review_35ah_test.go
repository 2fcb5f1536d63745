package power_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowSystem serves b, answering every GET of system id's resource after
// delay (a slow but working BMC: some answer a system read in seconds).
func slowSystem(b *redfishtest.BMC, id string, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/"+id {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(delay):
			}
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35_SlowSystemReadNeverConnects (review round 19, issue 35
// point 1, the Redfish adapter's discover; faults kept on): host A's BMC
// works, but answers a read of A's system in 60 % of ConnectTimeout (a
// slow BMC: 18 s of the default 30 s). Round 18 gives the direct read of
// the system half of the connect's time left: it runs out, the Systems
// collection answers, and the connect fails as the host's own system's
// failure. It does so on every try, for ever: A is never served, its
// fence never sent, although its BMC answers every request well within
// ConnectTimeout, and its calls (the same read) within CallTimeout.
// Before round 18 the read had the whole ConnectTimeout and A connected.
// Ground truth: A's hardware and the emulator's reset log.
func TestReview35_SlowSystemReadNeverConnects(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	srv := httptest.NewTLSServer(slowSystem(b, "1", 600*time.Millisecond))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 5 * time.Second})
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	ctx := context.Background()
	var err error
	for try := 0; try < 4; try++ {
		if err = a.Off(ctx, power.ModeHard); err == nil {
			break
		}
		t.Logf("try %d: %v", try, err)
		clk.Advance(10 * time.Minute) // any back-off is over
	}
	require.NoError(t, err, "host A, whose BMC answers every read within 60%% of ConnectTimeout, is never served")
	assert.Equal(t, []string{"ForceOff"}, b.Resets())
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s)
}
