package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37r_SharedPassSlowCallNeverMoves (issue 37, review round 16):
// plan.Turns' doc promises "every plan whose pass fits half of the pass
// moves at least once every as many passes as there are plans cut short",
// and the etcd Leadership.Pass doc "a plan whose pass needs more than its
// share still moves". Plan B's pass is one job creation that answers in
// 150 ms (it honours its context): it fits half of a 400 ms pass. Alone,
// it succeeds in its first pass (TestCallShareLastActionHasTheRest). But
// next to one other running plan (A, whose pass is cheap), every call of
// B gets at most a quarter of what is left (Executor.call: n = callShare
// whenever the pass is shared), about 100 ms even in B's long turn, which
// starts with the whole pass left: the call never answers in time, and
// B's server is never rebooted, pass after pass, with the fleet answering
// every time. Ground truth: the fake fleet's job creations.
func TestReview37r_SharedPassSlowCallNeverMoves(t *testing.T) {
	oa := opts()
	oa.UUID = "review37r-shared-a"
	oa.Concurrency = plan.Count(1)
	a := newWorld(t, fleetServers(0, 3, time.Hour), "", oa)
	ob := opts()
	ob.UUID = "review37r-shared-b"
	ob.Concurrency = plan.Count(1)
	fsb := fleetServers(0, 1, time.Minute)
	b := newWorld(t, fsb, "", ob)
	exA := &plan.Executor{Fleet: a.fleet, Store: a.store, Now: a.clk.Now}
	exB := &plan.Executor{Fleet: slowOneFleet{b.fleet, fsb[0].UUID, 150 * time.Millisecond}, Store: b.store, Now: b.clk.Now}
	turns := []plan.Turn{{UUID: oa.UUID, Acts: true}, {UUID: ob.UUID, Acts: true}}
	var tr plan.Turns
	var lastErrs []error
	for pass := 0; pass < 6; pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		errs, err := tr.Run(ctx, turns, nil, func(ctx context.Context, uuid string) error {
			var err error
			if uuid == oa.UUID {
				_, err = exA.Pass(ctx, uuid)
			} else {
				_, err = exB.Pass(ctx, uuid)
			}
			return err
		})
		cancel()
		require.NoError(t, err)
		lastErrs = errs
		if b.fleet.JobsCreated()[fsb[0].UUID] > 0 {
			break
		}
		a.clk.Advance(time.Second)
		b.clk.Advance(time.Second)
	}
	assert.Positive(t, b.fleet.JobsCreated()[fsb[0].UUID],
		"plan B's only call (150 ms, half of the pass is 200 ms) never answered in time in 6 shared passes; last errors: %v", lastErrs)
}

// TestReview37r_SlowServerNeverGetsTheRest (issue 37, review round 16):
// a server whose job creation answers, every time, in 90 ms of a 200 ms
// pass (well within Executor.CallTimeout, which the operator set to bound
// a call) is asked among four others first: its call has a quarter of the
// pass (50 ms), runs out, and the server is marked slow. From then on it
// is asked last, with nearly all the pass left (the others answer at
// once), yet a server marked slow gets "a quarter at most, whatever is
// left" (Executor.call), and "until one answers in time" (CallTimeout's
// doc) never comes: its reboot is never started while the fleet answers
// every call, and is released JobTimeout later. Before 376128b the last
// action had all that was left. Ground truth: the fake fleet's job
// creations.
func TestReview37r_SlowServerNeverGetsTheRest(t *testing.T) {
	fs := fleetServers(0, 5, time.Minute)
	o := opts()
	o.UUID = "review37r-slow-rest"
	o.Concurrency = plan.Count(5)
	w := newWorld(t, fs, "", o)
	f := slowOneFleet{w.fleet, fs[0].UUID, 90 * time.Millisecond}
	ex := &plan.Executor{Fleet: f, Store: w.store, Now: w.clk.Now, CallTimeout: time.Second}
	var errs []error
	for pass := 0; pass < 6 && w.fleet.JobsCreated()[fs[0].UUID] == 0; pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := ex.Pass(ctx, w.uuid)
		cancel()
		errs = append(errs, err)
		w.clk.Advance(time.Second)
	}
	for _, s := range fs[1:] {
		require.Equal(t, 1, w.fleet.JobsCreated()[s.UUID], "the other servers' jobs")
	}
	assert.Positive(t, w.fleet.JobsCreated()[fs[0].UUID],
		"a server whose calls answer in 90 ms, asked last with about 200 ms of the pass left, never got its job in 6 passes: %v", errs)
}

// slowOneFleet: CreateJob of server slow takes its time (honouring its
// context); the others answer at once.
type slowOneFleet struct {
	*fake.Fleet
	slow string
	took time.Duration
}

func (f slowOneFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if a.Server == f.slow {
		if err := take(ctx, f.took); err != nil {
			return err
		}
	}
	return f.Fleet.CreateJob(ctx, a)
}

// TestReview37r_IdlePlanHalvesActingPlan (issue 37, review round 16):
// Turns' doc: "a plan that does not act never takes the time of one that
// does". One running plan whose pass needs 60 % of the pass, and one plan
// that does not act (stopped with nothing in flight: a 1 ms pass). Alone,
// the running plan moves every pass. Next to the idle plan it is given
// half of the pass (n = acting + 1: "one more share kept for the plans
// that do not act"), which the idle plan then leaves unused at the end of
// the pass, where nothing can take it back: the running plan is cut
// short, moves only in its long turn, i.e. every other pass. Ground
// truth: the passes that finished.
func TestReview37r_IdlePlanHalvesActingPlan(t *testing.T) {
	need := map[string]time.Duration{"run": 240 * time.Millisecond, "stopped": time.Millisecond}
	turns := []plan.Turn{{UUID: "run", Acts: true}, {UUID: "stopped", Acts: false}}
	moved := map[string]int{}
	var tr plan.Turns
	const passes = 4
	for pass := 0; pass < passes; pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		_, err := tr.Run(ctx, turns, nil, needsStrict(need, moved))
		cancel()
		require.NoError(t, err)
	}
	assert.Equal(t, passes, moved["stopped"])
	assert.Equal(t, passes, moved["run"], "the running plan (60 %% of a pass, the only one that acts) moved in %d of %d passes next to a plan that does not act", moved["run"], passes)
}

// TestReview37r_HangingIdlePlanStarvesActingPlan (issue 37, review round
// 16), the fault kept on: the plan that does not act has a pass that never
// ends (its observation hangs: a dead BMC, a hung health check). It is
// cut short every pass, so it takes the long turn (the second half of
// the pass, at least) every other pass, and in the passes between, the
// running plan has a quarter (the first half, shared with one share kept
// for the idle plans). The running plan, which alone moves every pass
// (60 % of a pass), never moves again while the idle plan hangs: "a plan
// that does not act never takes the time of one that does" (Turns).
// Ground truth: the passes that finished.
func TestReview37r_HangingIdlePlanStarvesActingPlan(t *testing.T) {
	need := map[string]time.Duration{"run": 240 * time.Millisecond, "stopped": time.Hour}
	turns := []plan.Turn{{UUID: "run", Acts: true}, {UUID: "stopped", Acts: false}}
	moved := map[string]int{}
	var tr plan.Turns
	const passes = 6
	for pass := 0; pass < passes; pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		_, err := tr.Run(ctx, turns, nil, needsStrict(need, moved))
		cancel()
		require.NoError(t, err)
	}
	assert.Equal(t, passes, moved["run"], "the running plan (60 %% of a pass) moved in %d of %d passes next to a plan that does not act and hangs", moved["run"], passes)
}

// slowUnfreezeFleet: UnfreezeShard takes its time (honouring its
// context); everything else answers at once.
type slowUnfreezeFleet struct {
	*fake.Fleet
	took time.Duration
}

func (f slowUnfreezeFleet) UnfreezeShard(ctx context.Context) error {
	if err := take(ctx, f.took); err != nil {
		return err
	}
	return f.Fleet.UnfreezeShard(ctx)
}

// take waits d, honouring ctx strictly: a call whose context ended first
// (even if its goroutine ran late and both are ready) fails, so that a
// busy machine never lets a slow call succeed after its deadline.
func take(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	return ctx.Err()
}

// TestReview37r_SharedPassShardNeverUnfrozen (issue 37, review round 16):
// the same cap as TestReview37r_SharedPassSlowCallNeverMoves on the call
// that matters most: the shard primary's plan shares the executor's pass
// with another running plan, and the database's unfreeze answers in
// 150 ms of a 400 ms pass (every time). Every call of a shared pass has a
// quarter of what is left (about 100 ms), so the unfreeze never succeeds:
// the primary rebooted and is healthy, yet the shard stays frozen, pass
// after pass (3 h 20 min of the fleet's time here, past every timeout
// of the reboot), and the plan never ends. Ground truth: the fake fleet's
// shard (Frozen).
func TestReview37r_SharedPassShardNeverUnfrozen(t *testing.T) {
	oa := opts()
	oa.UUID = "review37r-unfreeze-a"
	oa.Concurrency = plan.Count(1)
	a := newWorld(t, fleetServers(0, 3, 24*time.Hour), "", oa)
	ob := opts()
	ob.UUID = "review37r-unfreeze-b"
	ob.Concurrency = plan.Count(1)
	fsb := fleetServers(0, 1, time.Minute)
	b := newWorld(t, fsb, fsb[0].UUID, ob)
	exA := &plan.Executor{Fleet: a.fleet, Store: a.store, Now: a.clk.Now}
	exB := &plan.Executor{Fleet: slowUnfreezeFleet{b.fleet, 150 * time.Millisecond}, Store: b.store, Now: b.clk.Now}
	turns := []plan.Turn{{UUID: oa.UUID, Acts: true}, {UUID: ob.UUID, Acts: true}}
	var tr plan.Turns
	var last []error
	var vb plan.View
	everFrozen := false
	passes := 0
	for pass := 0; pass < 40; pass++ {
		passes++
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		errs, err := tr.Run(ctx, turns, nil, func(ctx context.Context, uuid string) error {
			if uuid == oa.UUID {
				_, err := exA.Pass(ctx, uuid)
				return err
			}
			v, err := exB.Pass(ctx, uuid)
			if v.UUID != "" {
				vb = v
			}
			return err
		})
		cancel()
		require.NoError(t, err)
		last = errs
		frozen, _ := b.fleet.Frozen()
		everFrozen = everFrozen || frozen
		if everFrozen && !frozen && !vb.Unfinished() {
			break
		}
		a.clk.Advance(5 * time.Minute)
		b.clk.Advance(5 * time.Minute)
	}
	require.True(t, everFrozen, "the primary's reboot never froze the shard")
	frozen, _ := b.fleet.Frozen()
	assert.False(t, frozen, "the shard is still frozen after %d passes, %s after its primary's plan began (its plan: %s, %+v); last errors: %v",
		passes, time.Duration(passes)*5*time.Minute, vb.State, vb.Summary(), last)
	assert.False(t, vb.Unfinished(), "the primary's plan never ended")
}

// needsStrict is needs (turns_test.go), which waits with take: a pass
// whose context ended first never counts as moved, however late its
// goroutine ran.
func needsStrict(need map[string]time.Duration, moved map[string]int) func(context.Context, string) error {
	return needs(need, moved)
}
