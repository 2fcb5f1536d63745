package plan_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestPutViewRefusesIncompleteView: the bbolt store and the Views adapter
// refuse (ErrViewIncomplete) a view that does not load the stored reboot
// in flight, or the stored first pending one, and write nothing; the view
// GetView returns is written.
func TestPutViewRefusesIncompleteView(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 3)
	for _, tc := range []struct {
		name string
		wrap func(*plan.BoltStore) plan.ViewStore
	}{
		{"bolt", func(s *plan.BoltStore) plan.ViewStore { return s }},
		{"adapter", func(s *plan.BoltStore) plan.ViewStore { return plan.Views(s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
			require.NoError(t, err)
			defer b.Close()
			s := tc.wrap(b)
			r := runningPlanOf(t, "r", servers, clk.Now())
			at := clk.Now()
			r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
			require.NoError(t, s.Create(ctx, r))

			v, err := s.GetView(ctx, "r")
			require.NoError(t, err)
			require.Equal(t, []int{0}, v.Index.InFlight)
			require.Equal(t, 1, v.Index.Started)

			// Without the reboot in flight.
			drop := plan.View{Plan: v.Plan, Index: v.Index, Pos: []int{}}
			drop.Reboots = nil
			drop.State = plan.StateCanceled
			drop.Index.InFlight = nil
			drop.Index.Failed++
			assert.ErrorIs(t, s.PutView(ctx, drop), plan.ErrViewIncomplete)

			// With it, but without the first pending one (position 1).
			nop := plan.View{Plan: v.Plan, Index: v.Index, Pos: []int{0}}
			nop.Reboots = v.Reboots[:1]
			assert.ErrorIs(t, s.PutView(ctx, nop), plan.ErrViewIncomplete)

			got, err := s.Get(ctx, "r")
			require.NoError(t, err)
			assert.Equal(t, plan.StateRunning, got.State, "a refused view wrote nothing")
			assert.Equal(t, plan.StepJob, got.Reboots[0].Step)

			v.State = plan.StateStopped
			require.NoError(t, s.PutView(ctx, v), "the view GetView returned is written")
		})
	}
}
