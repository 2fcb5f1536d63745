package plantest

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// observed is one way of observing a plan: its name, what it reported,
// and the reboots whose servers it covers (every one of the plan for
// Observe and a full view, the view's own for a partial view).
type observed struct {
	way     string
	o       plan.Observations
	reboots []plan.Reboot
}

// observeAll observes p through Observe and, for a plan.ViewFleet, through
// ObserveView of p's full view and of a partial view of each reboot of p
// (the Executor uses ObserveView, of partial views, when its store is a
// plan.ViewStore): one result per way, Observe first.
func observeAll(ctx context.Context, t testing.TB, fleet plan.Fleet, p plan.Plan, what string) []observed {
	t.Helper()
	o, err := fleet.Observe(ctx, p)
	if err != nil {
		t.Fatalf("Observe (%s): %v", what, err)
	}
	out := []observed{{way: "Observe", o: o, reboots: p.Reboots}}
	vf, ok := fleet.(plan.ViewFleet)
	if !ok {
		return out
	}
	full := plan.FullView(p)
	full.Members = plan.MembersOf(p)
	if o, err = vf.ObserveView(ctx, full); err != nil {
		t.Fatalf("ObserveView of a full view (%s): %v", what, err)
	}
	out = append(out, observed{way: "ObserveView of a full view", o: o, reboots: p.Reboots})
	for k, r := range p.Reboots {
		v := partialView(p, k)
		if o, err = vf.ObserveView(ctx, v); err != nil {
			t.Fatalf("ObserveView of a partial view of %s (%s): %v", r.ServerUUID, what, err)
		}
		out = append(out, observed{way: "ObserveView of a partial view of " + r.ServerUUID, o: o, reboots: v.Reboots})
	}
	return out
}

// partialView is the view of p holding its reboot at k only (Partial:
// what the Executor observes each pass on a plan.ViewStore).
func partialView(p plan.Plan, k int) plan.View {
	v := plan.FullView(p)
	v.Reboots = []plan.Reboot{p.Reboots[k]}
	v.Pos = []int{k}
	v.Members = plan.MembersOf(p)
	return v
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
	for _, ob := range observeAll(ctx, t, fleet, p, "the headnode, "+when) {
		if !ob.o.HeadnodeServicesUp {
			t.Errorf("%s, %s of a healthy fleet with a headnode (HasHeadnode true) does not report HeadnodeServicesUp: every reboot would wait in wait_headnode for Config.ServicesTimeout, then fail", when, ob.way)
		}
	}
}

// checkShard checks a plan.ShardFleet's freeze: the healthy fleet's shard
// reported healthy before, while and after it is frozen; FreezeShard
// (twice: idempotent) observed frozen, UnfreezeShard (twice) observed not
// frozen, each within a minute of fleet time, and the shard healthy again
// within shardHealthWait (the Executor's default ServicesTimeout, which it
// waits for the shard's health before it unfreezes).
// shardHealthWait is how long the kit waits, in fleet time, for a shard
// to be reported healthy after a freeze or an unfreeze: the default
// Config.ServicesTimeout, the Executor's own wait before it unfreezes.
const shardHealthWait = time.Hour

func checkShard(ctx context.Context, t testing.TB, f Fleet, p plan.Plan) {
	t.Helper()
	sf, ok := f.Fleet.(plan.ShardFleet)
	if !ok {
		return
	}
	for _, ob := range observeAll(ctx, t, f.Fleet, p, "the shard") {
		if !ob.o.ShardHealthy {
			t.Errorf("%s of a healthy fleet does not report its database shard healthy (ShardHealthy): the Executor unfreezes only a healthy shard, so every primary's reboot would leave it frozen", ob.way)
		}
	}
	step := func(name string, call func(context.Context) error, frozen bool) {
		t.Helper()
		for i := 0; i < 2; i++ {
			if err := call(ctx); err != nil {
				t.Errorf("%s (call %d; both are idempotent): %v", name, i+1, err)
			}
		}
		// The state must show within a minute; health, as the Executor
		// waits for it before it unfreezes, within ServicesTimeout (a
		// shard may report itself unhealthy while it settles).
		var got []observed
		var waited time.Duration
		for ; ; waited += 10 * time.Second {
			got = observeAll(ctx, t, f.Fleet, p, "after "+name)
			state, healthy := true, true
			for _, ob := range got {
				state = state && ob.o.ShardFrozen == frozen
				healthy = healthy && ob.o.ShardHealthy
			}
			if state && healthy || !state && waited >= time.Minute || waited >= shardHealthWait {
				break
			}
			f.Advance(10 * time.Second)
		}
		for _, ob := range got {
			if ob.o.ShardFrozen != frozen {
				t.Errorf("%v after %s, %s reports ShardFrozen %v, want %v (a shard left frozen keeps its primary's reboot failed_unfreeze and its plan from ending; one never seen frozen fails the primary's reboot before its job)",
					waited, name, ob.way, ob.o.ShardFrozen, frozen)
			}
			if !ob.o.ShardHealthy {
				t.Errorf("%v after %s, %s reports the healthy fleet's shard not healthy (ShardHealthy false, ShardFrozen %v): the Executor unfreezes only a healthy shard and waits for it Config.ServicesTimeout (%v), so a shard reported unhealthy that long while frozen is never unfrozen: the primary's reboot fails (failed_unfreeze) and the shard stays frozen after its plan ended",
					waited, name, ob.way, ob.o.ShardFrozen, shardHealthWait)
			}
		}
	}
	step("FreezeShard", sf.FreezeShard, true)
	step("UnfreezeShard", sf.UnfreezeShard, false)
}
