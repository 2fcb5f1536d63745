package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// operatorPlan is a running plan of three servers, one done (so that an
// ETA can be estimated), one in flight.
func operatorPlan(t *testing.T, hostnames ...string) plan.Plan {
	t.Helper()
	var fleet []plan.Server
	for i, h := range hostnames {
		fleet = append(fleet, plan.Server{UUID: "s" + string(rune('0'+i)), Hostname: h, Platform: "1"})
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "p-ops", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1)})
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	t0, t1 := fake.Epoch, fake.Epoch.Add(5*time.Minute)
	p.Reboots[0].Step, p.Reboots[0].JobUUID, p.Reboots[0].StartedAt, p.Reboots[0].OperationalAt = plan.StepDone, "j0", &t0, &t1
	p.Reboots[1].Step, p.Reboots[1].JobUUID, p.Reboots[1].StartedAt = plan.StepJob, "j1", &t1
	require.NoError(t, p.Validate())
	return p
}

// TestStoppedPlanShowsNoETA (issue 27): a stopped plan estimated the time
// left as if it were running.
func TestStoppedPlanShowsNoETA(t *testing.T) {
	p := operatorPlan(t, "cn0", "cn1", "cn2")
	now := fake.Epoch.Add(6 * time.Minute)
	assert.Contains(t, plan.Summarize(p, now).Line(10), "ETA 8m", "running: an estimate")
	assert.Contains(t, plan.FullView(p).Summary().Line(10), "ETA 8m")
	for _, f := range []func(plan.Plan) (plan.Plan, error){plan.Stop, plan.Cancel} {
		q, err := f(p)
		require.NoError(t, err)
		s := plan.Summarize(q, now)
		assert.Zero(t, s.ETA, q.State)
		assert.NotContains(t, s.Line(10), "ETA", q.State)
		assert.NotContains(t, plan.FullView(q).Summary().Line(10), "ETA", q.State)
	}
}

// TestTableSizesColumnsToHostnames (issue 27): hostnames over 14
// characters pushed the other columns out of line.
func TestTableSizesColumnsToHostnames(t *testing.T) {
	p := operatorPlan(t, "cn0", "compute-node-0042.rack7.dc1.example.com", "cn2")
	lines := strings.Split(strings.TrimSpace(plan.Table(p)), "\n")
	require.Len(t, lines, 5)
	col := strings.Index(lines[1], "CORE")
	require.Greater(t, col, len("compute-node-0042.rack7.dc1.example.com"))
	for _, l := range lines[2:] {
		assert.Equal(t, " ", l[col-1:col], "columns line up:\n%s", strings.Join(lines, "\n"))
		assert.NotEqual(t, " ", l[col+6:col+7], "STARTED column starts where its header does:\n%s", strings.Join(lines, "\n"))
	}
}

// TestDryRunPlanBlocksNothing (issue 27): an unfinished dry-run plan
// refused a real plan over the same servers ("server is in another
// unfinished plan").
func TestDryRunPlanBlocksNothing(t *testing.T) {
	fleet := []plan.Server{{UUID: "s0", Hostname: "cn0", Platform: "1"}, {UUID: "s1", Hostname: "cn1", Platform: "1"}}
	dry, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "dry", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1), DryRun: true})
	require.NoError(t, err)
	real, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "real", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1), Existing: []plan.Plan{dry}})
	require.NoError(t, err)
	assert.NoError(t, plan.CheckOthers(real, []plan.Plan{dry}))
	ok, _ := plan.MayRebootOutside([]plan.Plan{dry}, "s0", "")
	assert.True(t, ok)
	st, err := plan.OpenBolt(t.TempDir() + "/plans.db")
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Create(t.Context(), dry))
	assert.NoError(t, st.Create(t.Context(), real))
	assert.Contains(t, plan.Table(dry), "dry run")
}
