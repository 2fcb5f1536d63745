package plan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// resumeStores are the stores of this package, each new and empty.
func resumeStores(t *testing.T) map[string]plan.Store {
	bolt, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = bolt.Close() })
	return map[string]plan.Store{"bolt": bolt, "file": plan.FileStore{Dir: t.TempDir()}}
}

// resumeServers are n servers of a fake fleet.
func resumeServers(clk *fake.Clock, n int) []plan.Server {
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1"}
	}
	return fake.NewFleet(clk.Now, "", fs...).Servers()
}

func runningPlanOf(t *testing.T, uuid string, servers []plan.Server, at time.Time) plan.Plan {
	p, _, err := plan.Create(servers, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(2), CreatedAt: at})
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	return p
}

// TestResumedEndedPlanOverlapsNewPlan (issue 37, review round 7 finding
// 7, the stores of this package): a write of a plan that ended (Command:
// PutHead on bbolt; Edit: Put; a view: PutView) may set it unfinished
// again; none checked the other unfinished plans as Create does, so once
// its servers were in a new plan, setting the old one running gave two
// unfinished plans over the same servers. Ground truth: the stored plans,
// read back (List). A resume that overlaps nothing still succeeds.
func TestResumedEndedPlanOverlapsNewPlan(t *testing.T) {
	setRunning := func(p plan.Plan) (plan.Plan, error) {
		p.State = plan.StateRunning
		return p, nil
	}
	writes := map[string]func(ctx context.Context, s plan.Store) error{
		"command": func(ctx context.Context, s plan.Store) error {
			_, err := plan.Command(ctx, s, "old", setRunning)
			return err
		},
		"edit": func(ctx context.Context, s plan.Store) error {
			_, err := plan.Edit(ctx, s, "old", setRunning)
			return err
		},
		"view": func(ctx context.Context, s plan.Store) error {
			vs, ok := s.(plan.ViewStore)
			if !ok {
				_, err := plan.Edit(ctx, s, "old", setRunning)
				return err
			}
			v, err := vs.GetView(ctx, "old")
			if err != nil {
				return err
			}
			v.State = plan.StateRunning
			return vs.PutView(ctx, v)
		},
	}
	for wname, write := range writes {
		for sname, s := range resumeStores(t) {
			t.Run(sname+"/"+wname, func(t *testing.T) {
				ctx := context.Background()
				clk := fake.NewClock(time.Time{})
				servers := resumeServers(clk, 6)
				require.NoError(t, s.Create(ctx, runningPlanOf(t, "old", servers, clk.Now())))
				_, err := plan.Command(ctx, s, "old", plan.Cancel)
				require.NoError(t, err)
				require.NoError(t, s.Create(ctx, runningPlanOf(t, "new", servers[3:], clk.Now())), "the old plan ended: its servers are free")

				err = write(ctx, s)
				assert.ErrorIs(t, err, plan.ErrEndedOverlaps)
				assert.ErrorIs(t, err, plan.ErrServerInPlan)
				plans, lerr := s.List(ctx)
				require.NoError(t, lerr)
				var unfinished []string
				for _, p := range plans {
					if p.Unfinished() {
						unfinished = append(unfinished, p.UUID)
					}
				}
				assert.Equal(t, []string{"new"}, unfinished, "ground truth: the unfinished plans stored")

				// Once the new plan ended, the old one may run again.
				_, err = plan.Command(ctx, s, "new", plan.Cancel)
				require.NoError(t, err)
				require.NoError(t, write(ctx, s))
				p, err := s.Get(ctx, "old")
				require.NoError(t, err)
				assert.True(t, p.Unfinished(), "ground truth: the old plan runs again")
			})
		}
	}
}
