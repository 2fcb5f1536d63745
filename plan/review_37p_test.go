package plan_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

var errRefusedSelf = errors.New("refused: cn000 could not be told apart from this machine; restart the executor with --self")

// lateRefusingFleet: CreateJob of one server ignores its context (as
// inventory.Fleet.CreateJob does), takes 50 ms, then refuses the job.
type lateRefusingFleet struct {
	*fake.Fleet
	server string
}

func (f lateRefusingFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if a.Server == f.server {
		time.Sleep(50 * time.Millisecond)
		return errRefusedSelf
	}
	return f.Fleet.CreateJob(ctx, a)
}

// TestReview37p_CallTimeoutHidesFleetAnswer (issue 37, review round 14):
// Executor.call reports ErrCallTimeout ("the fleet did not answer in
// time") for any error returned after the call's own deadline, and drops
// the fleet's answer: a fleet that ignores its context and answers late
// with a refusal (here one telling the operator what to do) is logged as
// not answering, and the refusal is lost from the pass's error. Ground
// truth: what the fake fleet returned.
func TestReview37p_CallTimeoutHidesFleetAnswer(t *testing.T) {
	fs := fleetServers(0, 2, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(2)
	w := newWorld(t, fs, "", o)
	ex := &plan.Executor{Fleet: lateRefusingFleet{w.fleet, fs[0].UUID}, Store: w.store, Now: w.clk.Now, CallTimeout: 5 * time.Millisecond}
	_, err := ex.Pass(w.ctx, w.uuid)
	require.Error(t, err)
	assert.ErrorIs(t, err, errRefusedSelf, "the fleet answered (late) with a refusal; the pass reports: %v", err)
}
