package redfish_test

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestQueuedPressWindowEndsWhenItsTaskReadsEnded: a press answered 202
// Accepted keeps an unanswered reset's window (no press for LostLanding +
// SoftTimeout + StaleReads of its return) unless its task is read ended:
// then it counts as a press answered at that reading, and a run of Off
// reads StaleReads after that ends its window as an answered press's does.
func TestQueuedPressWindowEndsWhenItsTaskReadsEnded(t *testing.T) {
	for _, read := range []bool{false, true} {
		r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{SoftDelay: 10 * time.Second})
		const monitor = "/redfish/v1/TaskService/Tasks/3"
		var mu sync.Mutex
		posts, ran := 0, false
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if req.URL.Path == monitor {
				w.Header().Set("Content-Type", "application/json")
				if !ran {
					w.WriteHeader(http.StatusAccepted)
					_, _ = w.Write([]byte(`{"TaskState":"Running"}`))
					return
				}
				_, _ = w.Write([]byte(`{"TaskState":"Completed"}`))
				return
			}
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "ComputerSystem.Reset") {
				if posts++; posts == 1 {
					w.Header().Set("Location", monitor)
					w.WriteHeader(http.StatusAccepted)
					return
				}
			}
			r.bmc.ServeHTTP(w, req)
		}))
		t.Cleanup(srv.Close)
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		r.cfg.Endpoint, r.cfg.RootCAs = srv.URL, pool
		c := r.connect(t)

		require.NoError(t, c.Off(ctx, power.ModeSoft), "the press: 202 Accepted")
		r.clk.Advance(5 * time.Second) // the queue runs it
		require.NoError(t, r.hw.Off(ctx, power.ModeSoft))
		mu.Lock()
		ran = true
		mu.Unlock()
		r.clk.Advance(20 * time.Second) // t=25 s: off since 15 s
		if read {
			got, err := c.ReadTask(ctx, monitor)
			require.NoError(t, err)
			require.Equal(t, power.TaskEnded, got)
		}
		r.clk.Advance(35 * time.Second) // t=60 s: StaleReads after the reading
		s, err := c.State(ctx)
		require.NoError(t, err)
		require.Equal(t, power.StateOff, s)
		require.NoError(t, r.hw.On(ctx)) // powered on out of band
		r.clk.Advance(40 * time.Second)  // t=100 s
		err = c.Off(ctx, power.ModeSoft)
		mu.Lock()
		n := posts
		mu.Unlock()
		if read {
			require.NoError(t, err, "the task read ended at 25 s, its shutdown seen over at 60 s: the press may go")
			require.Equal(t, 2, n)
		} else {
			require.ErrorIs(t, err, power.ErrNotSent, "a queued press whose task was never read ended: its window is an unanswered reset's")
			require.Equal(t, 1, n)
		}
	}
}
