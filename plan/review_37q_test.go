package plan_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

var errRefused37q = errors.New("refused (fake)")

// hangFirstFleet: CreateJob of server hang never answers (it honours its
// context); every other server's CreateJob is refused at once (so that it
// is asked again by every pass). It records the servers of the calls of
// each pass in order.
type hangFirstFleet struct {
	*fake.Fleet
	hang  string
	mu    *sync.Mutex
	calls *[]string
}

func (f hangFirstFleet) CreateJob(ctx context.Context, a plan.Action) error {
	f.mu.Lock()
	*f.calls = append(*f.calls, a.Server)
	f.mu.Unlock()
	if a.Server == f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errRefused37q
}

// TestReview37q_HangingLastCallForgetsItIsSlow (issue 37, review round
// 15): "A call that runs out of its time is reported (ErrCallTimeout) and
// its server's actions are taken after all others in the next passes of
// the process, until one answers in time" (Executor.CallTimeout). Since
// a call gets Share(ctx, min(4, actions left)), the last action of a pass
// (where slowLast puts the hanging server) gets all that is left of the
// pass: its deadline is the pass's own, so when it runs out the pass has
// too, call() sees ctx.Err() != nil, reports a plain context error (not
// ErrCallTimeout) and markSlow(server, false) forgets that the server
// hangs. The next pass asks the hanging server first again, ahead of the
// others, and it takes a quarter of that pass before any other action:
// with the fault kept on, every other pass starts with the hanging call.
// Ground truth: the order of the calls the fleet received, pass by pass.
func TestReview37q_HangingLastCallForgetsItIsSlow(t *testing.T) {
	fs := fleetServers(0, 5, time.Minute)
	o := opts()
	o.UUID = "review37q-hang-last"
	o.Concurrency = plan.Count(5)
	w := newWorld(t, fs, "", o)
	var mu sync.Mutex
	var calls []string
	f := hangFirstFleet{w.fleet, fs[0].UUID, &mu, &calls}
	ex := &plan.Executor{Fleet: f, Store: w.store, Now: w.clk.Now} // CallTimeout: the default (30 s)
	var orders [][]string
	var errs []error
	for pass := 0; pass < 4; pass++ {
		mu.Lock()
		calls = nil
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := ex.Pass(ctx, w.uuid)
		cancel()
		mu.Lock()
		orders = append(orders, append([]string(nil), calls...))
		mu.Unlock()
		errs = append(errs, err)
		w.clk.Advance(time.Second)
	}
	for k, o := range orders {
		t.Logf("pass %d: calls %v; error: %v", k, o, errs[k])
	}
	require.Contains(t, orders[0], fs[0].UUID, "the first pass asks the hanging server")
	for k := 1; k < len(orders); k++ {
		o := orders[k]
		require.NotEmpty(t, o, "pass %d asked nothing", k)
		assert.Equal(t, fs[0].UUID, o[len(o)-1], "pass %d: the server whose call ran out of time in an earlier pass is asked after all others (calls in order: %v)", k, o)
		assert.ErrorIs(t, errs[k], plan.ErrCallTimeout, "pass %d: the hanging call is reported as not answering in time", k)
	}
}

// timedHangFleet: CreateJob of server hang never answers (it honours its
// context); it adds up how long the hanging calls held the pass, and
// how long their contexts gave them (deadline less start).
type timedHangFleet struct {
	*fake.Fleet
	hang  string
	mu    *sync.Mutex
	held  *time.Duration
	given *time.Duration
}

func (f timedHangFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if a.Server != f.hang {
		return f.Fleet.CreateJob(ctx, a)
	}
	start := time.Now()
	if dl, ok := ctx.Deadline(); ok {
		f.mu.Lock()
		*f.given += dl.Sub(start)
		f.mu.Unlock()
	}
	<-ctx.Done()
	f.mu.Lock()
	*f.held += time.Since(start)
	f.mu.Unlock()
	return ctx.Err()
}

// TestReview37q_OneHangingCallUsesUpThePass (issue 37, review round 15):
// "one call that hangs never uses up the passes" (Executor.CallTimeout);
// "a call that never answers leaves the rest of the pass three quarters
// of its time" (callShare). Since round 14 a pass's last action gets all
// that is left of its plan's share (Share(ctx, min(4, left))), and
// slowLast makes the hanging server's action the last one (here it is
// the plan's only one): the hanging call takes its plan's whole share,
// and the last plan of a pass has all that is left of the pass. When
// CallTimeout ends the call first (the defaults: etcd's 1 min pass, 30 s
// calls), the plan is cut short (ErrCallTimeout) and plan.Turns' second
// round gives it all that is left again. One server whose CreateJob
// never answers, in one plan of two, holds every pass of the executor
// for all of its timeout (before round 14: a quarter of its plan's
// share), so every other plan moves that much more slowly for as long as
// that one BMC is dead. Ground truth: how long the fleet held the
// hanging calls, per pass.
//
// Corrected in review round 16 (TestReview37r_SharedPassSlowCallNeverMoves):
// a call of a shared pass has at most half of what is left of the
// executor's pass (a call that fits half of the pass must answer in its
// plan's long turn, plan.Turns), so the hanging call is given just under
// half of the pass, and held it that long plus the scheduler's lateness.
// The assertion is on the time its context gave it (the deadline the
// fleet received, less the call's start: not load-sensitive), below half
// of the pass; what it held is logged.
func TestReview37q_OneHangingCallUsesUpThePass(t *testing.T) {
	ctx := context.Background()
	fs := fleetServers(0, 3, time.Hour)
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", fs...)
	servers := fleet.Servers()
	store := fake.NewPlanStore()
	for _, pc := range []struct {
		uuid    string
		servers []plan.Server
	}{{"review37q-h", servers[:1]}, {"review37q-a", servers[1:]}} {
		p, _, err := plan.Create(pc.servers, plan.CreateOptions{UUID: pc.uuid, Target: "2", Select: plan.SelectAll,
			Concurrency: plan.Count(1), CreatedAt: clk.Now()})
		require.NoError(t, err)
		p, err = plan.Run(p)
		require.NoError(t, err)
		require.NoError(t, store.Create(ctx, p))
	}
	var mu sync.Mutex
	var held, given time.Duration
	ex := &plan.Executor{Fleet: timedHangFleet{fleet, fs[0].UUID, &mu, &held, &given}, Store: store, Now: clk.Now} // CallTimeout: 30 s
	var tr plan.Turns
	turns := []plan.Turn{{UUID: "review37q-a", Acts: true}, {UUID: "review37q-h", Acts: true}}
	const pass = 800 * time.Millisecond
	var worst time.Duration
	for k := 0; k < 4; k++ {
		mu.Lock()
		held, given = 0, 0
		mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, pass)
		_, err := tr.Run(pctx, turns, nil, func(ctx context.Context, uuid string) error { _, err := ex.Pass(ctx, uuid); return err })
		cancel()
		require.NoError(t, err)
		mu.Lock()
		t.Logf("pass %d: the hanging calls were given %s and held %s of %s", k, given.Round(time.Millisecond), held.Round(time.Millisecond), pass)
		worst = max(worst, given)
		mu.Unlock()
		clk.Advance(time.Second)
	}
	assert.Less(t, worst, pass/2, "one hanging call was given %s of a pass of %s", worst, pass)
}

// TestReview37q_PlansThatDoNotActEatTheShares (issue 37, review round
// 15; Low): plan.Turns says "no plan ever has less than its equal share
// of half of the pass" and that a plan that does not act "counts for
// none of the others'". But each plan that does not act (created and not
// run, stopped with nothing in flight: on etcd its pass still reads its
// view and observes the fleet) takes up to 1/(acting+1) of what is left,
// in the plans' order, ahead of the acting plans after it: six such plans
// whose passes take 100 ms each (a fleet API's latency) use the whole
// 600 ms pass, and the one running plan after them, whose pass needs
// 50 ms (its equal share of half of the pass is 300/7 = 43 ms; the
// others decide nothing), gets nothing and is cut short. It moves again
// only when the rotating long turn comes to it (the plans that do not act
// and were cut compete for that turn too). Ground truth: the running
// plan's pass did not finish.
func TestReview37q_PlansThatDoNotActEatTheShares(t *testing.T) {
	var turns []plan.Turn
	need := map[string]time.Duration{}
	for k := 0; k < 6; k++ {
		u := fmt.Sprintf("c%d", k)
		turns = append(turns, plan.Turn{UUID: u, Acts: false})
		need[u] = 100 * time.Millisecond
	}
	turns = append(turns, plan.Turn{UUID: "z", Acts: true})
	need["z"] = 50 * time.Millisecond
	moved := map[string]int{}
	var tr plan.Turns
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	_, err := tr.Run(ctx, turns, nil, needs(need, moved))
	require.NoError(t, err)
	t.Logf("moved: %v", moved)
	assert.Equal(t, 1, moved["z"], "the one running plan, whose pass needs 50 ms of a 600 ms pass, did not move: the six plans that do not act used its time")
}
