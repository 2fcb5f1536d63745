package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// tasked is an adapter that reads task monitors: every one answers
// reading, and asked records what was read.
type tasked struct {
	power.Controller
	reading power.TaskReading
	asked   []string
}

func (t *tasked) ReadTask(_ context.Context, monitor string) (power.TaskReading, error) {
	t.asked = append(t.asked, monitor)
	return t.reading, nil
}

// TestPoolReadTask (review 39 round 16): a Pool's Controller is a
// power.TaskReader: its ReadTask is the connected adapter's (the monitor
// passed as is, the answer handed back), and an adapter that cannot read
// a task gives ErrUnsupported and touches nothing.
func TestPoolReadTask(t *testing.T) {
	ctx := context.Background()
	pool := power.NewPool(power.PoolConfig{})
	defer pool.Close()
	hw := &tasked{Controller: fake.NewPower(time.Now, fake.PowerConfig{}), reading: power.TaskGone}
	c := pool.Controller("h1", power.Target{BMC: "bmc-1", Config: "v1",
		Connect: func(context.Context) (power.Controller, error) { return hw, nil }})
	tr, ok := c.(power.TaskReader)
	require.True(t, ok, "a Pool's Controller is a TaskReader")
	r, err := tr.ReadTask(ctx, "/redfish/v1/TaskService/Tasks/3")
	require.NoError(t, err)
	assert.Equal(t, power.TaskGone, r)
	assert.Equal(t, []string{"/redfish/v1/TaskService/Tasks/3"}, hw.asked)

	plain := fake.NewPower(time.Now, fake.PowerConfig{})
	c2 := pool.Controller("h2", power.Target{BMC: "bmc-2", Config: "v1",
		Connect: func(context.Context) (power.Controller, error) { return onlyPower{plain}, nil }})
	r, err = c2.(power.TaskReader).ReadTask(ctx, "/redfish/v1/TaskService/Tasks/3")
	require.ErrorIs(t, err, power.ErrUnsupported)
	assert.Equal(t, power.TaskNotEnded, r)
	assert.Empty(t, plain.Calls(), "no call reached the hardware")
}
