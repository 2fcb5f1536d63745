package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Review 36 (round 2): rebootkit-controller hands the Reconciler
// kube.Async's controller (main.go: Power: async.Controller), wrapping the
// guarded Pool controller. Round 1 made the Pool and the lease guard pass
// reboot.Toggler on; Async's controller does not, so in the production
// binary the Reconciler never learns that a soft power-off is a press of
// the power button: the scenario of issue 36 point 1 (OS takes 45 s,
// reads 20 s late, soft reissue after ReissueAfter on a stale On) presses
// the button of the held host and powers it on.
func TestReview36_AsyncHidesTogglerHeldHostPressedOn(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}})
	async := &Async{Power: func(string) (power.Controller, error) { return pw, nil }}
	pc, err := async.Controller("h")
	require.NoError(t, err)
	_, ok := pc.(reboot.Toggler)
	assert.True(t, ok, "kube.Async's controller must pass reboot.Toggler on (the wrapped one says a soft power-off is a press)")

	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: async.Controller}
	_, err = r.Reconcile(ctx, "h")
	require.NoError(t, err)
	clk.Advance(5 * time.Minute)
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	for end := start.Add(5 * time.Minute); clk.Real().Before(end); {
		res, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	for _, tc := range pw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && !tc.At.Before(start) {
			t.Fatalf("the held host (keyed annotation present) was powered on by a press %v after the request; truth %s",
				tc.At.Sub(start), rebootcheck.DescribeTruth(pw))
		}
	}
}
