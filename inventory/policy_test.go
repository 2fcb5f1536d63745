package inventory

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

const withPolicy = good + `    labels: {rack: r12, zone: z1}
plan:
  windows:
    time_zone: Europe/Berlin
    weekly: ["Mon-Fri 22:00-06:00"]
    ranges: [{start: 2026-12-24T00:00:00+01:00, end: 2026-12-27T00:00:00+01:00}]
    expect: 30m
  ramp: "1,5,20%"
  domain_limits: ["rack=1", "zone=10%"]
  conditions:
    - name: no-alerts
      command: [sh, -c, "echo ALERT DiskFull firing; exit 1"]
`

func TestParsePlanPolicy(t *testing.T) {
	inv, err := Parse([]byte(withPolicy))
	require.NoError(t, err)
	cn, _ := inv.Server("cn1")
	assert.Equal(t, map[string]string{"rack": "r12", "zone": "z1"}, cn.Labels)
	assert.Equal(t, cn.Labels, inv.PlanServers()[1].Labels)
	w := inv.Plan.WindowsOf()
	require.NotNil(t, w)
	assert.Equal(t, "Europe/Berlin", w.TimeZone)
	assert.Equal(t, 30*time.Minute, w.Expect)
	assert.Equal(t, time.Date(2026, 12, 23, 23, 0, 0, 0, time.UTC), w.Ranges[0].Start.UTC())
	ramp, err := inv.Plan.RampOf()
	require.NoError(t, err)
	assert.Equal(t, []plan.Limit{plan.Count(1), plan.Count(5), plan.Percent(20)}, ramp)
	limits, err := inv.Plan.DomainLimitsOf()
	require.NoError(t, err)
	assert.Equal(t, []plan.DomainLimit{{Label: "rack", Max: 1}, {Label: "zone", Max: 10, Percent: true}}, limits)

	for name, doc := range map[string]string{
		"unknown zone":   strings.Replace(withPolicy, "Europe/Berlin", "Europe/Atlantis", 1),
		"bad weekly":     strings.Replace(withPolicy, "Mon-Fri 22:00-06:00", "Mon-Fri 22:00", 1),
		"bad ramp":       strings.Replace(withPolicy, `"1,5,20%"`, `"1,0"`, 1),
		"bad limit":      strings.Replace(withPolicy, `"rack=1"`, `"rack"`, 1),
		"no command":     strings.Replace(withPolicy, `command: [sh, -c, "echo ALERT DiskFull firing; exit 1"]`, "command: []", 1),
		"empty label":    strings.Replace(withPolicy, "{rack: r12, zone: z1}", `{"": r12}`, 1),
		"misspelt key":   strings.Replace(withPolicy, "domain_limits:", "domain_limit:", 1),
		"range backward": strings.Replace(withPolicy, "end: 2026-12-27", "end: 2026-12-20", 1),
	} {
		_, err := Parse([]byte(doc))
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

// TestConditionsRun: the executor's fleet runs an unfinished plan's
// blocking conditions with every Observe and reports their exit and
// output.
func TestConditionsRun(t *testing.T) {
	inv, err := Parse([]byte(withPolicy))
	require.NoError(t, err)
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{})
	require.NoError(t, err)
	defer f.Close()
	p := plan.Plan{UUID: "p", State: plan.StateRunning, Concurrency: 1, Conditions: append(inv.Plan.Conditions,
		plan.Condition{Name: "quiet", Command: []string{"true"}})}
	res := f.conditions(t.Context(), p)
	require.Len(t, res, 2)
	assert.False(t, res["no-alerts"].OK)
	assert.Equal(t, "ALERT DiskFull firing\n(exit status 1)", res["no-alerts"].Output)
	assert.True(t, res["quiet"].OK)
	assert.WithinDuration(t, time.Now(), res["quiet"].At, time.Minute)
	p.State = plan.StateCanceled
	assert.Nil(t, f.conditions(t.Context(), p), "checked for unfinished plans only")
}

// TestRegressionConditionsCheckedWhileStopped: a stopped (or canceled)
// plan may hold a reboot that has not created its job yet; the plan lets
// it create the job only on a fresh success of every condition, so the
// fleet must keep checking them (it checked running plans only, and such a
// reboot waited for good).
func TestRegressionConditionsCheckedWhileStopped(t *testing.T) {
	inv, err := Parse([]byte(withPolicy))
	require.NoError(t, err)
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{})
	require.NoError(t, err)
	defer f.Close()
	for _, st := range []plan.State{plan.StateStopped, plan.StateCanceled} {
		p := plan.Plan{UUID: "p", State: st, Concurrency: 1, Conditions: []plan.Condition{{Name: "quiet", Command: []string{"true"}}},
			Reboots: []plan.Reboot{{ServerUUID: "cn1", Step: plan.StepWaitHead}}}
		res := f.conditions(t.Context(), p)
		assert.True(t, res["quiet"].OK, "%s plan with a reboot in flight", st)
	}
}

// Issue 37 point 12: an inventory `windows:` section with a time zone and
// no window used to be taken as no restriction at all (reboots at any
// time); it is refused at parse time (so at plan create).
func TestRegression37WindowsWithoutWindow(t *testing.T) {
	doc := strings.Replace(withPolicy, `    weekly: ["Mon-Fri 22:00-06:00"]
    ranges: [{start: 2026-12-24T00:00:00+01:00, end: 2026-12-27T00:00:00+01:00}]
`, "", 1)
	require.NotEqual(t, withPolicy, doc)
	_, err := Parse([]byte(doc))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "no weekly window and no range")
}
