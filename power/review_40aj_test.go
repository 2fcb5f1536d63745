package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/power"
)

// TestReview40aj_PoolPowersOnWithGuardContextEndedByClock: a Guard's
// context (reboot.ClockBound: etcd.Leadership.Guard, kube.LeaseGuard, the
// Reconciler's hold) reports the end of its lease through Err before its
// timer closes Done, for a leader paused past its lease (clockctx.go: "a
// store that checks ctx.Err() just before it sends would send a write its
// Guard no longer covers ... contexts derived from the result check their
// own deadline only when their timer fires, so check this one"). The
// Reconciler hands that context to its power call (reconciler.go:752-771,
// pc.On(ctx)). Called directly, an adapter that checks ctx.Err() before
// it sends (fake.Power here; power/redfish checks the command's context
// before hc.Do) refuses; called through power.Pool, the context the
// adapter sees is pooled.call's context.WithTimeout of the Guard's
// (pool_call.go:156), a plain cancelCtx whose Err stays nil until the
// timer fires: the power-on goes out after the lease's end. Ground truth:
// the fake hardware's own state.
func TestReview40aj_PoolPowersOnWithGuardContextEndedByClock(t *testing.T) {
	bg := context.Background()
	e := endedctx.From(bg)[1] // ClockBound past its deadline, Done open
	if e.Ctx.Err() == nil {
		t.Fatal("setup: the clock-ended context reports no Err")
	}

	direct := fake.NewPower(time.Now, fake.PowerConfig{})
	direct.ForceState(power.StateOff)
	if err := direct.On(e.Ctx); err == nil || direct.HardwareOn() {
		t.Fatalf("ground truth: the adapter called directly powered on with the ended context (err %v)", err)
	}

	fp := fake.NewPower(time.Now, fake.PowerConfig{})
	fp.ForceState(power.StateOff)
	pool := power.NewPool(power.PoolConfig{})
	t.Cleanup(func() { _ = pool.Close() })
	c := pool.Controller("h", power.Target{BMC: "bmc-1", Config: "c", Login: "l",
		Connect: func(context.Context) (power.Controller, error) { return fp, nil }})
	if _, err := c.State(bg); err != nil { // a session in place, as in a running controller
		t.Fatalf("State: %v", err)
	}
	err := c.On(e.Ctx)
	if fp.HardwareOn() {
		t.Fatalf("power.Pool powered the host on with %s (On returned %v): a paused leader's power-on lands after its lease ended, where the adapter alone refuses", e.Name, err)
	}
	if err == nil {
		t.Errorf("Pool.On with an ended context returned nil")
	}
}
