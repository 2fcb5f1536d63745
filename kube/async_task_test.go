package kube

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// queuingOn is a BMC that accepts a power-on as a task (power.NoteTask)
// and carries it out only when land is called; its task reads ended
// once landed (or never, if endless).
type queuingOn struct {
	*fake.Power
	landed  atomic.Bool
	endless bool
}

func (q *queuingOn) On(ctx context.Context) error {
	power.NoteTask(ctx, "/redfish/v1/TaskService/Tasks/1", func(context.Context) (bool, error) {
		return q.landed.Load() && !q.endless, nil
	})
	return nil
}

func (q *queuingOn) land() { _ = q.Power.On(context.Background()); q.landed.Store(true) }

// TestAsyncQueuedOnInFlightUntilTaskEnds (review 39 round 14): a
// power-on the BMC accepted for later is in flight (ErrInFlight, not
// Settled) until its task ended, and its answer is handed over
// (LateAnswer) only then; one whose task never ends nor lands is left as
// it is after TaskLimit (ErrTaskOverdue, ErrInFlight) and not settled.
func TestAsyncQueuedOnInFlightUntilTaskEnds(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw.Off(context.Background(), power.ModeHard))
	bmc := &queuingOn{Power: hw}
	a := &Async{Wait: 50 * time.Millisecond, TaskPoll: 10 * time.Millisecond, TaskLimit: time.Minute,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	pc, err := a.Controller("h")
	require.NoError(t, err)
	ctx := context.Background()
	assert.ErrorIs(t, pc.On(ctx), ErrInFlight, "a power-on accepted for later is in flight")
	time.Sleep(100 * time.Millisecond)
	_, settled := a.Settled("h", time.Second, time.Now())
	assert.False(t, settled, "not settled while the task runs")
	_, err = pc.State(ctx)
	assert.ErrorIs(t, err, ErrInFlight, "no reading is taken while the task runs")
	bmc.land()
	require.Eventually(t, func() bool { return !a.InFlight("h") }, 5*time.Second, 5*time.Millisecond)
	late, ok := pc.(*asyncController).LateAnswer()
	assert.True(t, ok, "the answer is handed over once the task ended")
	assert.NoError(t, late.Err)
	s, err := pc.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)

	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	require.NoError(t, hw2.Off(context.Background(), power.ModeHard))
	stuck := &queuingOn{Power: hw2, endless: true}
	b := &Async{Wait: 50 * time.Millisecond, TaskPoll: 10 * time.Millisecond, TaskLimit: 200 * time.Millisecond,
		Power: func(string) (power.Controller, error) { return stuck, nil }}
	pc2, err := b.Controller("h2")
	require.NoError(t, err)
	assert.ErrorIs(t, pc2.On(ctx), ErrInFlight)
	require.Eventually(t, func() bool { return !b.InFlight("h2") }, 5*time.Second, 5*time.Millisecond)
	_, err = pc2.State(ctx)
	assert.ErrorIs(t, err, ErrTaskOverdue, "left as it is after TaskLimit")
	assert.ErrorIs(t, err, ErrInFlight)
	assert.Contains(t, err.Error(), "/redfish/v1/TaskService/Tasks/1", "names the task")
	assert.ErrorIs(t, pc2.Off(ctx, power.ModeHard), ErrTaskOverdue, "nothing is sent")
}
