package plantest

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// observeAll observes p through Observe and, for a plan.ViewFleet, through
// ObserveView of p's full view too (the Executor uses ObserveView when its
// store is a plan.ViewStore): one result per way, named.
func observeAll(ctx context.Context, t testing.TB, fleet plan.Fleet, p plan.Plan, what string) map[string]plan.Observations {
	t.Helper()
	out := map[string]plan.Observations{}
	o, err := fleet.Observe(ctx, p)
	if err != nil {
		t.Fatalf("Observe (%s): %v", what, err)
	}
	out["Observe"] = o
	if vf, ok := fleet.(plan.ViewFleet); ok {
		v := plan.FullView(p)
		v.Members = plan.MembersOf(p)
		if o, err = vf.ObserveView(ctx, v); err != nil {
			t.Fatalf("ObserveView (%s): %v", what, err)
		}
		out["ObserveView"] = o
	}
	return out
}

// checkHeadnode checks that a fleet with a headnode (plan.HeadnodeFleet,
// HasHeadnode true), healthy, reports its services up: a reboot waits in
// wait_headnode until it does, and fails after Config.ServicesTimeout.
func checkHeadnode(ctx context.Context, t testing.TB, fleet plan.Fleet, p plan.Plan, when string) {
	t.Helper()
	hf, ok := fleet.(plan.HeadnodeFleet)
	if !ok || !hf.HasHeadnode() {
		return
	}
	for way, o := range observeAll(ctx, t, fleet, p, "the headnode, "+when) {
		if !o.HeadnodeServicesUp {
			t.Errorf("%s, %s of a healthy fleet with a headnode (HasHeadnode true) does not report HeadnodeServicesUp: every reboot would wait in wait_headnode for Config.ServicesTimeout, then fail", when, way)
		}
	}
}

// checkShard checks a plan.ShardFleet's freeze: the healthy fleet's shard
// reported healthy; FreezeShard (twice: idempotent) observed frozen,
// UnfreezeShard (twice) observed not frozen, each within a minute of fleet
// time.
func checkShard(ctx context.Context, t testing.TB, f Fleet, p plan.Plan) {
	t.Helper()
	sf, ok := f.Fleet.(plan.ShardFleet)
	if !ok {
		return
	}
	for way, o := range observeAll(ctx, t, f.Fleet, p, "the shard") {
		if !o.ShardHealthy {
			t.Errorf("%s of a healthy fleet does not report its database shard healthy (ShardHealthy): the Executor unfreezes only a healthy shard, so every primary's reboot would leave it frozen", way)
		}
	}
	step := func(name string, call func(context.Context) error, frozen bool) {
		t.Helper()
		for i := 0; i < 2; i++ {
			if err := call(ctx); err != nil {
				t.Errorf("%s (call %d; both are idempotent): %v", name, i+1, err)
			}
		}
		var got map[string]plan.Observations
		for waited := time.Duration(0); ; waited += 10 * time.Second {
			got = observeAll(ctx, t, f.Fleet, p, "after "+name)
			all := true
			for _, o := range got {
				all = all && o.ShardFrozen == frozen
			}
			if all || waited >= time.Minute {
				break
			}
			f.Advance(10 * time.Second)
		}
		for way, o := range got {
			if o.ShardFrozen != frozen {
				t.Errorf("a minute after %s, %s reports ShardFrozen %v, want %v (a shard left frozen keeps its primary's reboot failed_unfreeze and its plan from ending; one never seen frozen fails the primary's reboot before its job)",
					name, way, o.ShardFrozen, frozen)
			}
		}
	}
	step("FreezeShard", sf.FreezeShard, true)
	step("UnfreezeShard", sf.UnfreezeShard, false)
}
