package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// slowNoHardOff is a BMC that offers no hard power-off (a Redfish system
// whose reset types are On and GracefulShutdown: the adapter reads the
// state, then answers unsupported) and takes longer than Async.Wait to
// answer, as a real BMC does (one GET, 0.3 s).
type slowNoHardOff struct {
	*fake.Power
	delay time.Duration
}

func (n slowNoHardOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		time.Sleep(n.delay)
		return &power.Error{Op: power.OpName(m), Class: power.ClassUnsupported, Message: "none of [ForceOff PushPowerButton] among the allowable reset types"}
	}
	return n.Power.Off(ctx, m)
}

// Review 36 round 4: the round-3 fix (a hard power-off answered
// unsupported goes out soft, Observed.HardUnsupportedAt) learns the answer
// only from the call's own return. rebootkit-controller runs every BMC call
// through kube.Async (main.go, Wait 250 ms): a call slower than Wait
// returns ErrInFlight (busy) to the pass and its real answer is dropped
// (async.go: only a Reset's late outcome is kept). The Reconciler records
// a busy hard power-off, retries hard after RetryDelay, again in flight,
// for ever: a hard reboot on a BMC without ForceOff is never powered off
// nor answered in the production binary (the bug round 3 fixed, back).
func TestReview36_AsyncLosesHardUnsupported(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second, Lag: time.Second})
	async := &Async{Power: func(string) (power.Controller, error) { return slowNoHardOff{pw, 300 * time.Millisecond}, nil },
		Wait: 50 * time.Millisecond}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: async.Controller}
	run := func(limit time.Duration) {
		for end := clk.Real().Add(limit); clk.Real().Before(end); {
			res, err := r.Reconcile(ctx, "h")
			require.NoError(t, err)
			// Async's Done: the next pass comes once the call ended.
			for deadline := time.Now().Add(5 * time.Second); async.InFlight("h") && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 10 * time.Millisecond
			}
			clk.Advance(next)
		}
	}
	run(time.Minute)
	c := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	start := clk.Real()
	tk, err := c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	run(3 * time.Minute)
	f, err := c.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(start, clk.Real()) && f,
		"hard reboot through kube.Async on a slow BMC without a hard power-off: never powered off (fenced %v); truth %s",
		f, rebootcheck.DescribeTruth(pw))
}
