package plan_test

import (
	"context"
	"errors"
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
