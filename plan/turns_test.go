package plan_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// needs returns a pass that takes need[uuid] (honouring its context) and
// counts in moved the passes that finished.
func needs(need map[string]time.Duration, moved map[string]int) func(context.Context, string) error {
	return func(ctx context.Context, uuid string) error {
		if err := take(ctx, need[uuid]); err != nil {
			return err
		}
		moved[uuid]++
		return nil
	}
}

// TestTurnsGiveUnusedTimeBack: the first plan of a pass, which needs more
// than its equal share, moves with the time the later plans (cheap, or
// not acting) leave unused.
//
// Its times are those of the first version times 3 (the same ratios: the
// first plan needs 60 % of its equal share among the six plans that act,
// each other plan a 1/600 of the pass), so that the first plan's margin
// is 120 ms, not 40 ms: the scheduler's lateness under -race on two busy
// cores reached 40 ms.
func TestTurnsGiveUnusedTimeBack(t *testing.T) {
	const scale = 3
	turns := []plan.Turn{{UUID: "a", Acts: true}}
	need := map[string]time.Duration{"a": scale * 60 * time.Millisecond}
	for k := 0; k < 9; k++ {
		u := fmt.Sprintf("z%d", k)
		turns = append(turns, plan.Turn{UUID: u, Acts: k%2 == 0})
		need[u] = scale * time.Millisecond
	}
	moved := map[string]int{}
	var tr plan.Turns
	ctx, cancel := context.WithTimeout(context.Background(), scale*600*time.Millisecond)
	defer cancel()
	errs, err := tr.Run(ctx, turns, nil, needs(need, moved))
	require.NoError(t, err)
	assert.Equal(t, make([]error, len(turns)), errs)
	for _, p := range turns {
		assert.Equal(t, 1, moved[p.UUID], p.UUID)
	}
}

// TestTurnsEveryPlanMovesWhenOverloaded: four plans that each need more
// than a quarter of the pass (and less than half) all move within four
// passes (the long turn rotates among the plans cut short), and a plan
// that never answers stops none of them for good.
func TestTurnsEveryPlanMovesWhenOverloaded(t *testing.T) {
	need := map[string]time.Duration{"a": 120 * time.Millisecond, "b": 120 * time.Millisecond,
		"c": 120 * time.Millisecond, "d": 120 * time.Millisecond, "hang": time.Hour}
	turns := []plan.Turn{{UUID: "a", Acts: true}, {UUID: "b", Acts: true}, {UUID: "c", Acts: true}, {UUID: "d", Acts: true}, {UUID: "hang", Acts: true}}
	moved := map[string]int{}
	var tr plan.Turns
	stop := func(err error) bool { return false }
	for pass := 0; pass < 2*len(turns); pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		_, err := tr.Run(ctx, turns, stop, needs(need, moved))
		cancel()
		require.NoError(t, err)
	}
	for _, u := range []string{"a", "b", "c", "d"} {
		assert.Positive(t, moved[u], "plan %s never moved in %d passes: %v", u, 2*len(turns), moved)
	}
	assert.Zero(t, moved["hang"])
}

// TestTurnsStop: a pass whose error stop holds for ends the run at once.
func TestTurnsStop(t *testing.T) {
	var tr plan.Turns
	errLost := fmt.Errorf("lost the leadership")
	ran := 0
	errs, err := tr.Run(context.Background(), []plan.Turn{{UUID: "a", Acts: true}, {UUID: "b", Acts: true}},
		func(err error) bool { return err == errLost },
		func(context.Context, string) error { ran++; return errLost })
	assert.Nil(t, errs)
	assert.Equal(t, errLost, err)
	assert.Equal(t, 1, ran)
}

// slowCreateFleet: CreateJob takes its time (honouring its context).
type slowCreateFleet struct {
	*fake.Fleet
	took time.Duration
}

func (f slowCreateFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if err := take(ctx, f.took); err != nil {
		return err
	}
	return f.Fleet.CreateJob(ctx, a)
}

// TestCallShareLastActionHasTheRest: the only action of a pass (a job
// creation that answers in 60 ms of a 200 ms pass) is not cut to a
// quarter of the pass: no other action waits behind it. Ground truth: the
// fake fleet's job creations.
func TestCallShareLastActionHasTheRest(t *testing.T) {
	fs := fleetServers(0, 1, time.Minute)
	o := opts()
	o.UUID = "callshare-last" // its own plan: no other test of the process marked its server slow
	o.Concurrency = plan.Count(1)
	w := newWorld(t, fs, "", o)
	ex := &plan.Executor{Fleet: slowCreateFleet{w.fleet, 60 * time.Millisecond}, Store: w.store, Now: w.clk.Now}
	ctx, cancel := context.WithTimeout(w.ctx, 200*time.Millisecond)
	defer cancel()
	_, err := ex.Pass(ctx, w.uuid)
	require.NoError(t, err)
	assert.Equal(t, 1, w.fleet.JobsCreated()[fs[0].UUID])
}
