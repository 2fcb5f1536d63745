package redfish_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
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

// TestReview35ad_QueuedPressLandsLateSecondPressPowersFencedHostOn
// (review round 30): the press window after a press for a power-off is
// "SoftTimeout + StaleReads of its previous press ... counted from when
// its POST returned, the latest it may have reached the hardware", and a
// POST without an HTTP answer gets LostLanding more, because the BMC may
// still apply it. A press answered 202 Accepted is not applied when its
// POST returns either: the package doc itself says "the reset may take
// effect after the call returned, also after its deadline, until its
// task ended". Yet it is counted as landed at its return (pushOK, no
// lost window): a BMC whose job queue runs the press 40 s later (an
// OS that then takes 175 s, within SoftTimeout, to shut down; reads 25 s
// stale, within StaleReads) is off at 215 s, and a fence retried at 225 s
// (past 180 + 30 s from the return) reads On, an echo of the state
// before the shutdown, and presses: the host that just went off runs
// again. Ground truth: the fake hardware.
func TestReview35ad_QueuedPressLandsLateSecondPressPowersFencedHostOn(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{SoftDelay: 175 * time.Second, Report: fake.Report{Stale: 25 * time.Second}})
	const monitor = "/redfish/v1/TaskService/Tasks/7"
	var mu sync.Mutex
	queued, ran := 0, false
	var posts []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == monitor {
			mu.Lock()
			done := ran
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if !done {
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"TaskState":"Running"}`))
				return
			}
			_, _ = w.Write([]byte(`{"TaskState":"Completed"}`))
			return
		}
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "ComputerSystem.Reset") {
			raw, _ := io.ReadAll(req.Body)
			var body struct{ ResetType string }
			_ = json.Unmarshal(raw, &body)
			mu.Lock()
			posts = append(posts, body.ResetType)
			first := len(posts) == 1
			if first {
				queued++
			}
			mu.Unlock()
			if first { // the BMC queues the press as a task
				w.Header().Set("Location", monitor)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"@odata.id":"` + monitor + `","TaskState":"Running"}`))
				return
			}
			req.Body = io.NopCloser(strings.NewReader(string(raw)))
		}
		r.bmc.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	r.cfg.Endpoint, r.cfg.RootCAs = srv.URL, pool
	c := r.connect(t)

	require.NoError(t, c.Off(ctx, power.ModeSoft), "the fence's press: 202 Accepted")
	require.True(t, r.hw.HardwareOn(), "queued: nothing pressed yet")

	r.clk.Advance(40 * time.Second) // the BMC's job queue runs the press
	require.NoError(t, r.hw.Off(context.Background(), power.ModeSoft))
	mu.Lock()
	ran = true
	mu.Unlock()

	r.clk.Advance(175 * time.Second) // t=215 s: the OS is off
	require.False(t, r.hw.HardwareOn(), "the queued press's shutdown is over at 215 s")
	r.clk.Advance(10 * time.Second) // t=225 s: reads show t=200 s, On
	err := c.Off(ctx, power.ModeSoft)
	offAt := r.clk.Real()
	r.clk.Advance(time.Minute)
	mu.Lock()
	t.Logf("second Off at 225 s: %v; posts %v", err, posts)
	mu.Unlock()
	require.False(t, r.hw.HardwareOn(),
		"ground truth: the fenced host, off since 215 s (its press queued 40 s), runs again: a second press went out on an On read that echoed the state before the queued press's shutdown")
	require.True(t, r.hw.WasOffDuring(offAt, r.clk.Real()))
}
