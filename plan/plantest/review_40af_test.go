package plantest_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// review40afNoPrimary is a ShardFleet (it has a database shard: freeze
// and unfreeze work and are observed) whose Observe never sets
// Observations.ShardPrimary: the zero value issue 40 point 1 is about,
// for the shard instead of the headnode.
type review40afNoPrimary struct{ *fake.Fleet }

func (f review40afNoPrimary) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	o.ShardPrimary = ""
	return o, err
}

func (f review40afNoPrimary) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	o.ShardPrimary = ""
	return o, err
}

// review40afRunPlan runs a plan over s1 and s2 on fleet (built by
// review40abFleet with the primary on s1) to its end with the Executor on
// a fake clock, and returns the fleet's own count of reboots of s1 and of
// freezes.
func review40afRunPlan(t *testing.T, wrap func(*fake.Fleet) plan.Fleet) (rebootsS1, freezes int) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var servers []fake.FleetServer
	for _, id := range []string{"s1", "s2"} {
		servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
			Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
	}
	f := fake.NewFleet(clk.Now, "s1", servers...)
	p, _, err := plan.Create(f.Servers(), plan.CreateOptions{UUID: "plan-shard", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatal(err)
	}
	store := fake.NewPlanStore()
	if err := store.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	e := &plan.Executor{Fleet: wrap(f), Store: store, Now: clk.Now}
	for i := 0; i < 2000; i++ {
		v, _ := e.Pass(ctx, "plan-shard")
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	_, freezes = f.Frozen()
	return f.Reboots()["s1"], freezes
}

// TestReview40af_FleetContractPassesShardFleetWithoutPrimary: plan's doc
// makes the shard freeze an optional ability ("only a ShardFleet is asked
// to freeze"), and FleetContract checks a ShardFleet's freeze, unfreeze
// and health, but never that it reports where the shard's primary is
// (Observations.ShardPrimary), the field the Executor decides the freeze
// on. A ShardFleet of one's own that leaves it at its zero value (as
// issue 40 point 1's fleet left HeadnodeServicesUp) passes the kit, and
// the Executor reboots the primary's server without ever freezing the
// shard (ground truth: the fake fleet's own reboot and freeze counts),
// while the same fleet with the field set freezes before it.
func TestReview40af_FleetContractPassesShardFleetWithoutPrimary(t *testing.T) {
	honestReboots, honestFreezes := review40afRunPlan(t, func(f *fake.Fleet) plan.Fleet { return f })
	silentReboots, silentFreezes := review40afRunPlan(t, func(f *fake.Fleet) plan.Fleet { return review40afNoPrimary{f} })
	if honestReboots == 0 || honestFreezes == 0 || silentReboots == 0 {
		t.Fatalf("setup: honest fleet: s1 rebooted %d times, %d freezes; silent fleet: s1 rebooted %d times", honestReboots, honestFreezes, silentReboots)
	}
	t.Logf("ground truth: with ShardPrimary reported, the primary s1 rebooted %d time(s) after %d freeze(s); with it left empty, s1 rebooted %d time(s) after %d freeze(s)",
		honestReboots, honestFreezes, silentReboots, silentFreezes)
	failed := review40abRun(t, review40abFleet("s1", nil, func(f *fake.Fleet) plan.Fleet { return review40afNoPrimary{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a plan.ShardFleet that never reports Observations.ShardPrimary: the Executor never freezes its shard (ground truth: the primary s1 rebooted %d time(s) after %d freeze(s))", silentReboots, silentFreezes)
	}
	t.Logf("caught: %v", failed)
}
