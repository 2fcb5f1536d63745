//go:build e2e

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestPolicyEndToEnd: an inventory with rack labels and a plan section (at
// most one server per rack offline, a blocking condition); plan create
// with a maintenance window by flag. The condition holds the plan (watch
// and show print its output), nothing is power-cycled until it passes;
// then every reboot keeps to one per rack (ground truth of the BMCs'
// power).
func TestPolicyEndToEnd(t *testing.T) {
	l := newLab(t, 4, 0)
	raw, err := os.ReadFile(l.inv)
	require.NoError(t, err)
	doc := string(raw)
	for i := range l.ids {
		doc = strings.Replace(doc, fmt.Sprintf("hostname: cn%d\n", i), fmt.Sprintf("hostname: cn%d\n    labels: {rack: r%d}\n", i, i/2), 1)
	}
	gate := filepath.Join(l.dir, "go")
	doc += fmt.Sprintf("plan:\n  domain_limits: [\"rack=1\"]\n  conditions:\n    - name: gate\n      command: [sh, -c, \"echo ALERT NodeDown firing on cn9; test -f %s\"]\n", gate)
	require.NoError(t, os.WriteFile(l.inv, []byte(doc), 0o600))

	now := time.Now()
	window := now.Add(-time.Minute).Format(time.RFC3339) + "/" + now.Add(time.Hour).Format(time.RFC3339)
	const uuid = "e2e-policy"
	out, errs, code := l.ctl("plan", "create", "--all", "-N", "4", "--target", "2", "--uuid", uuid, "-r",
		"--window-range", window, "--time-zone", "Europe/Berlin", "--ramp", "1,2")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "maintenance windows (Europe/Berlin): ")
	assert.Contains(t, out, "canary ramp: 1, 2, then 4 at once")
	assert.Contains(t, out, "at most offline per domain: rack=1")
	assert.Contains(t, out, "blocking condition gate: sh -c echo ALERT")
	l.executor()
	p := l.waitFor(uuid, "the condition to hold the plan", time.Minute, func(p plan.Plan) bool {
		return strings.Contains(p.Waiting, "blocking condition gate fails")
	})
	assert.Contains(t, p.WaitingOutput, "ALERT NodeDown firing on cn9")
	out, _, code = l.ctl("plan", "show", uuid)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "    | ALERT NodeDown firing on cn9")
	time.Sleep(time.Second)
	assert.Empty(t, l.offs(), "nothing power-cycled while the condition fails")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	out, errs, code = l.ctl("plan", "watch", uuid)
	require.Equal(t, 0, code, "watch: %s\n%s", errs, out)
	assert.Equal(t, plan.StateComplete, l.get(uuid).State)
	var order []string
	for _, r := range l.get(uuid).Reboots {
		order = append(order, r.Labels["rack"])
	}
	assert.Equal(t, []string{"r0", "r1", "r0", "r1"}, order, "racks interleaved")
	for rack, ids := range map[string][]string{"r0": l.ids[:2], "r1": l.ids[2:]} {
		assert.LessOrEqual(t, l.maxOfflineOf(ids), 1, "rack %s", rack)
	}
}

// TestRenderHeldByCondition: watch shows the condition's output under the
// progress line while it holds the plan.
func TestRenderHeldByCondition(t *testing.T) {
	v := plan.FullView(plan.Plan{UUID: "p", State: plan.StateRunning, Concurrency: 2,
		Waiting:       "waiting: blocking condition no-alerts fails (checked 3s ago)",
		WaitingOutput: "ALERT DiskFull firing on cn001\nALERT NodeDown firing on cn002",
		Reboots:       []plan.Reboot{{ServerUUID: "u1", ServerHostname: "cn001"}}})
	lines := render(v, nil, "", time.Now())
	require.Len(t, lines, 4)
	assert.Contains(t, lines[1], "waiting: blocking condition no-alerts fails (checked 3s ago)")
	assert.Equal(t, []string{"    | ALERT DiskFull firing on cn001", "    | ALERT NodeDown firing on cn002"}, lines[2:])
}

// maxOfflineOf is the most of ids powered off at once (ground truth).
func (l *lab) maxOfflineOf(ids []string) int {
	type ev struct {
		at  time.Time
		off int
	}
	var evs []ev
	for _, id := range ids {
		for _, tc := range l.powers[id].Truth() {
			evs = append(evs, ev{tc.At, map[bool]int{true: -1, false: 1}[tc.On]})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		return evs[i].at.Before(evs[j].at) || evs[i].at.Equal(evs[j].at) && evs[i].off < evs[j].off
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.off
		best = max(best, cur)
	}
	return best
}
