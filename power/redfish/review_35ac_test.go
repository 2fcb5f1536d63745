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

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// holdingBMC serves b, but holds the answer of the next GET of a system
// (once armed): the BMC reads the state when the request arrives, and its
// answer reaches the client only when release is closed (a slow BMC).
type holdingBMC struct {
	b       http.Handler
	mu      sync.Mutex
	armed   bool
	arrived chan struct{}
	release chan struct{}
}

func (h *holdingBMC) arm() {
	h.mu.Lock()
	h.armed, h.arrived, h.release = true, make(chan struct{}), make(chan struct{})
	h.mu.Unlock()
}

func (h *holdingBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	hold := h.armed && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/")
	var arrived, release chan struct{}
	if hold {
		h.armed = false
		arrived, release = h.arrived, h.release
	}
	h.mu.Unlock()
	if !hold {
		h.b.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.b.ServeHTTP(rec, r) // the state as the request arrived
	close(arrived)
	<-release
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// Round 28 let a State read run beside a power command of the same
// Controller (sem and rsem). The press window after a press for a
// power-off ("not within SoftTimeout + StaleReads of its previous press
// ..., or, once an unbroken run of reads begun StaleReads after that
// press showed Off for OffSettle, within StaleReads of the read that
// completed the run. Every window is checked against when the read
// began") is now opened by a read that completes the run *while* the
// command's own read (begun before it, so possibly an echo of the state
// before the shutdown) is in flight: pushOverAt lies after the command's
// readAt, "over" is negative, and neither clause of pressSafe holds, so
// the second press goes out on an On read taken while the OS was still
// shutting down, and powers the host that just went off back on.
//
// Timeline (fake clock): t=0 press (soft off, NoGraceful), the OS is off
// at t=40 s. t=35 s a second soft Off (a fence retried) reads On (true at
// that moment), its answer late. t=45 s a monitor's State read (begun
// StaleReads after the press) reads Off: the run is complete. The
// second Off's read then arrives: On. Before round 28 the State read
// waited for the command, whose press was refused (35 s < 210 s).
func TestReview35ac_ConcurrentStateReadOpensPressWindowPoweringFencedHostOn(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{SoftDelay: 40 * time.Second})
	h := &holdingBMC{b: r.bmc}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	r.cfg.Endpoint, r.cfg.RootCAs = srv.URL, pool
	c := r.connect(t)

	require.NoError(t, c.Off(ctx, power.ModeSoft), "the first press")
	require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets())
	pressAt := r.clk.Real()

	r.clk.Advance(35 * time.Second)
	require.True(t, r.hw.HardwareOn(), "the OS is still shutting down at 35 s")
	h.arm()
	offDone := make(chan error, 1)
	go func() { offDone <- c.Off(ctx, power.ModeSoft) }()
	<-h.arrived // the second Off's read reached the BMC: it reads On

	r.clk.Advance(10 * time.Second) // t=45 s: the OS is off
	require.False(t, r.hw.HardwareOn(), "the press's shutdown is over at 40 s")
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.State(sctx) // runs beside the command since round 28
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s)

	close(h.release) // the second Off's read answers: On (its state at 35 s)
	err = <-offDone
	offAt := r.clk.Real()
	r.clk.Advance(time.Minute)
	t.Logf("second Off: %v; resets: %v", err, r.bmc.Resets())
	require.False(t, r.hw.HardwareOn(),
		"ground truth: the host a fence powered off (off since %s) is running again: a second press went out on an On read begun before the shutdown ended (resets %v)",
		pressAt.Add(40*time.Second).Sub(pressAt), r.bmc.Resets())
	require.True(t, r.hw.WasOffDuring(offAt, r.clk.Real()), "off for the minute after the fence")
}
