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

// TestReview37_EditAddsServersWhileUnfinished (issue 37 round 9): an Edit
// of an unfinished plan that changes its server list (a reboot added, or
// a reboot's server replaced by one another unfinished plan holds) makes
// the plan hold servers it did not. BoltStore refuses it ("the servers of
// a plan do not change"); FileStore.Put checks only NewlyHolds (ended ->
// unfinished, DryRun cleared) and writes it: two unfinished real plans
// over the same server. Ground truth: the stored plans, read back (List).
func TestReview37_EditAddsServersWhileUnfinished(t *testing.T) {
	edits := map[string]func(servers []plan.Server) func(plan.Plan) (plan.Plan, error){
		"append": func(servers []plan.Server) func(plan.Plan) (plan.Plan, error) {
			return func(p plan.Plan) (plan.Plan, error) {
				r := p.Reboots[0]
				r.ServerUUID, r.ServerHostname = servers[3].UUID, servers[3].Hostname
				p.Reboots = append(p.Reboots, r)
				return p, nil
			}
		},
		"replace": func(servers []plan.Server) func(plan.Plan) (plan.Plan, error) {
			return func(p plan.Plan) (plan.Plan, error) {
				p.Reboots[0].ServerUUID, p.Reboots[0].ServerHostname = servers[3].UUID, servers[3].Hostname
				return p, nil
			}
		},
	}
	for ename, edit := range edits {
		for sname, s := range resumeStores(t) {
			t.Run(ename+"/"+sname, func(t *testing.T) {
				ctx := context.Background()
				clk := fake.NewClock(time.Time{})
				servers := resumeServers(clk, 6)
				require.NoError(t, s.Create(ctx, runningPlanOf(t, "a", servers[:3], clk.Now())))
				require.NoError(t, s.Create(ctx, runningPlanOf(t, "b", servers[3:], clk.Now())))

				_, err := plan.Edit(ctx, s, "a", edit(servers))
				assert.Error(t, err, "an edit making plan a hold a server of plan b")

				plans, lerr := s.List(ctx)
				require.NoError(t, lerr)
				holder := map[string][]string{}
				for _, p := range plans {
					if p.Unfinished() && !p.DryRun {
						for _, r := range p.Reboots {
							holder[r.ServerUUID] = append(holder[r.ServerUUID], p.UUID)
						}
					}
				}
				assert.Len(t, holder[servers[3].UUID], 1, "ground truth: unfinished plans holding %s: %v", servers[3].UUID, holder[servers[3].UUID])
			})
		}
	}
}

// TestReview37_DryRunSetWithRebootInFlight (issue 37 round 9): the
// converse of NewlyHolds. A write setting DryRun on an unfinished real
// plan whose reboot is in flight (its job created: the server is being
// rebooted) makes the plan block nothing at once (CheckOthers skips
// dry-run plans), so a new plan over that very server is created while
// the job still runs. Nothing checks or refuses it. Ground truth: the
// stored plans, read back: a server whose reboot is in flight in one plan
// is in a second unfinished real plan.
func TestReview37_DryRunSetWithRebootInFlight(t *testing.T) {
	for sname, s := range resumeStores(t) {
		t.Run(sname, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			servers := resumeServers(clk, 6)
			r := runningPlanOf(t, "r", servers[:3], clk.Now())
			at := clk.Now()
			r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
			require.NoError(t, s.Create(ctx, r))

			_, derr := plan.Command(ctx, s, "r", func(p plan.Plan) (plan.Plan, error) {
				p.DryRun = true
				return p, nil
			})
			cerr := s.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
			assert.True(t, derr != nil || cerr != nil, "setting DryRun (%v) and then a plan over the server whose job runs (%v): one must be refused", derr, cerr)

			plans, lerr := s.List(ctx)
			require.NoError(t, lerr)
			var holders []string
			inFlight := false
			for _, p := range plans {
				for _, rb := range p.Reboots {
					if rb.ServerUUID != servers[0].UUID {
						continue
					}
					if rb.Step.InFlight() {
						inFlight = true
					}
					if p.Unfinished() && !p.DryRun {
						holders = append(holders, p.UUID)
					}
				}
			}
			assert.False(t, inFlight && len(holders) > 0 && !(len(holders) == 1 && holders[0] == "r"),
				"ground truth: %s has a reboot in flight and is held by %v", servers[0].UUID, holders)
		})
	}
}

// TestReview37_DryRunSetJobOverlaps (issue 37 round 9, the fleet's truth):
// as TestReview37_DryRunSetWithRebootInFlight, run by executors: plan r's
// job on a server runs; a Command sets DryRun on r; plan q is created over
// that server (nothing refuses it) and its executor creates a second job
// there while r's still runs. Ground truth: the fake fleet's job starts
// (SelfOffline: the server was offline, another job on it, already).
func TestReview37_DryRunSetJobOverlaps(t *testing.T) {
	ctx := context.Background()
	st, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer st.Close()
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, 3)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
			Queue: 10 * time.Second, Drain: 20 * time.Minute, Shutdown: 20 * time.Second, Boot: 4 * time.Minute, Services: time.Minute}
	}
	fleet := fake.NewFleet(clk.Now, "", fs...)
	servers := fleet.Servers()
	require.NoError(t, st.Create(ctx, runningPlanOf(t, "r", servers[:1], clk.Now())))
	exec := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	for i := 0; i < 10 && len(fleet.Starts()) == 0; i++ {
		_, _ = exec.Pass(ctx, "r")
		clk.Advance(5 * time.Second)
	}
	require.Len(t, fleet.Starts(), 1, "plan r's job created")

	_, derr := plan.Command(ctx, st, "r", func(p plan.Plan) (plan.Plan, error) {
		p.DryRun = true
		return p, nil
	})
	cerr := st.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	t.Logf("set DryRun: %v; create q: %v", derr, cerr)
	for i := 0; i < 10 && cerr == nil; i++ {
		_, _ = exec.Pass(ctx, "r")
		_, _ = exec.Pass(ctx, "q")
		clk.Advance(5 * time.Second)
	}
	t.Logf("starts: %+v", fleet.Starts())
	for _, s := range fleet.Starts() {
		assert.False(t, s.SelfOffline, "ground truth: a job created on %s at %s while another job ran there", s.Server, s.At)
	}
}
