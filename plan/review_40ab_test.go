package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// unfreezeDown is a ShardFleet whose UnfreezeShard fails for ever (the
// database's admin API refuses: a fault that stays on); the shard stays
// frozen, healthy.
type unfreezeDown struct{ *fake.Fleet }

func (unfreezeDown) UnfreezeShard(context.Context) error {
	return errors.New("shard admin API: connection refused")
}

// TestReview40ab_UnfreezeRefusedHoldsPlanForEver: the shard freeze is an
// optional ability of the Fleet; a reboot whose shard unfreeze the fleet
// refuses for ever (the shard healthy, frozen) stays in StepUnfreeze,
// counted in flight (offline) although its server is back up and its
// services too: with concurrency 1 the plan starts no other reboot, for
// ever: no step bound (every other step has one: drain 15 min, job 1 h,
// services 1 h; an unhealthy shard is given up after ServicesTimeout) and
// Plan.Waiting names an "offline" server, not the shard it waits for
// ("Plan.Waiting names what a reboot waits for"). Ground truth: the fake
// fleet's own reboot count (Reboots) and offline set.
func TestReview40ab_UnfreezeRefusedHoldsPlanForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var fs []fake.FleetServer
	for _, id := range []string{"s1", "s2", "s3"} {
		fs = append(fs, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
			Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
	}
	ff := fake.NewFleet(clk.Now, "s1", fs...)
	fleet := unfreezeDown{ff}
	st := fake.NewPlanStore()
	p, _, err := plan.Create(ff.Servers(), plan.CreateOptions{UUID: "p", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(3), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p, _ = plan.Run(p)
	if err := st.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	exec := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	// Six hours of passes every 30 s: longer than every step's bound.
	var v plan.View
	for i := 0; i < 6*120; i++ {
		v, _ = exec.Pass(ctx, "p") // the unfreeze's error is reported each pass
		clk.Advance(30 * time.Second)
	}
	reboots := ff.Reboots()
	frozen, _ := ff.Frozen()
	t.Logf("after 6 h: state %s, reboots %v, fleet offline %v, shard frozen %v, waiting %q", v.State, reboots, ff.Offline(), frozen, v.Waiting)
	for _, r := range v.Reboots {
		t.Logf("  %s: step %s error %q", r.ServerUUID, r.Step, r.Error)
	}
	if len(ff.Offline()) == 0 && reboots["s2"] == 0 && reboots["s3"] == 0 {
		t.Errorf("6 h after the shard primary's reboot, with every server up (fleet's truth) and a concurrency of 1, the plan has started no other reboot: the reboot whose unfreeze is refused holds its slot for ever (state %s)", v.State)
	}
	if !strings.Contains(v.Waiting, "shard") && !strings.Contains(v.Waiting, "unfreez") {
		t.Errorf("Plan.Waiting = %q: it does not name the shard unfreeze the plan waits for", v.Waiting)
	}
}
