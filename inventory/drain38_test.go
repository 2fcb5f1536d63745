package inventory

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
)

// TestCancelInterruptsDrain (issue 38, B.14): a job's drain command runs
// (a drain that would take its whole 15 minutes) when its plan cancels it:
// the drain is interrupted at once, its effect undone (undrain), and the
// job ends cancelled, not failed. Old code: the cancel was recorded, and
// the drain ran on for up to its command timeout before the job looked at
// it.
func TestCancelInterruptsDrain(t *testing.T) {
	const id = "00000000-0000-4000-8000-000000000000"
	inv := Inventory{Servers: []Server{{UUID: id, Hostname: "cn0", Platform: "1",
		BMC: BMC{Redfish: "https://bmc0", Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"},
		Drain: []string{"drain"}, Undrain: []string{"undrain"}}}}
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	bmc := fake.NewPower(clk.Real, fake.PowerConfig{})
	var mu sync.Mutex
	var undrained int
	var drainEnded time.Time
	started := make(chan struct{})
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{
		Poll: 10 * time.Millisecond, CallTimeout: time.Second, Now: clk.Now,
		Controller: func(context.Context, Server) (power.Controller, error) { return bmc, nil },
		Health:     func(context.Context, Server) error { return nil },
		BootID:     func() (string, error) { return "boot", nil },
		command: func(ctx context.Context, argv []string) error {
			switch argv[0] {
			case "drain":
				close(started)
				select {
				case <-ctx.Done():
				case <-time.After(15 * time.Minute): // the drain's command timeout
				}
				mu.Lock()
				drainEnded = time.Now()
				mu.Unlock()
				return ctx.Err()
			case "undrain":
				mu.Lock()
				undrained++
				mu.Unlock()
			}
			return nil
		},
	})
	require.NoError(t, err)
	defer f.Close()
	a := plan.Action{Kind: plan.ActionCreateJob, Server: id, JobUUID: "j1", PlanUUID: "p1", Drain: true}
	require.NoError(t, f.CreateJob(context.Background(), a))
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the drain never started")
	}
	cancelled := time.Now()
	require.NoError(t, f.CancelJob(context.Background(), a))
	var j JobRecord
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if j, _, err = f.job("j1"); err == nil && j.Over() {
			break
		}
	}
	require.True(t, j.Over(), "the job did not end within 30 s of its cancel: %s (the drain was not interrupted)", j.State)
	assert.Equal(t, JobCancelled, j.State, j.Error)
	assert.Contains(t, j.Error, "cancelled while draining")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, undrained, "the interrupted drain was undone")
	assert.False(t, drainEnded.IsZero())
	assert.Less(t, drainEnded.Sub(cancelled), 30*time.Second, "the drain ended soon after the cancel")
	assert.Zero(t, bmc.Cycles(), "a cancelled job never powers its server off")
}
