package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
)

// TestReview38_TakeBackUndoneByNextPass (review 38 round 3): the operator
// abandoned cn0 in plan p1 ("plan abandon p1 cn0", recorded in the plan
// store's meta for good). Later a job of plan p2 takes cn0 back (the
// fleet's documented rule: "a job of another plan takes the server back").
// The executor's next pass (passAll) applies every abandon ever recorded
// again (applyAbandoned), and Fleet.Abandon, seeing cn0 no longer
// abandoned, abandons it again for p1: p2's live job is interrupted and
// ends failed "abandoned by the operator", its request and OffMaybe are
// dropped, and no later plan can ever reboot cn0. Expected: once a job of
// another plan took cn0 back, the old abandon no longer applies.
func TestReview38_TakeBackUndoneByNextPass(t *testing.T) {
	const u0, u1 = "00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001"
	inv := inventory.Inventory{}
	for i, u := range []string{u0, u1} {
		inv.Servers = append(inv.Servers, inventory.Server{UUID: u, Hostname: []string{"cn0", "cn1"}[i], Platform: "1",
			BMC: inventory.BMC{Redfish: "https://bmc-" + u, Username: "u", PasswordEnv: "P"}, Health: inventory.Health{TCP: "h:1"}})
	}
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	f, err := inventory.OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), inventory.Options{
		Controller: func(context.Context, inventory.Server) (power.Controller, error) { return p, nil },
		Health:     func(context.Context, inventory.Server) error { return nil },
		BootID:     func() (string, error) { return "boot-1", nil },
		Self:       "none",
	})
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	raw, err := json.Marshal(map[string]abandonRecord{u0: {Plan: "p1", At: time.Now().UTC(), By: "alice"}})
	require.NoError(t, err)
	require.NoError(t, applyAbandoned(f, raw, nil)) // a pass
	require.NoError(t, f.CreateJob(context.Background(), plan.Action{Server: u0, JobUUID: "j2", PlanUUID: "p2"}), "p2 takes cn0 back")
	require.NoError(t, applyAbandoned(f, raw, nil)) // the next pass
	st, err := f.Status()
	require.NoError(t, err)
	for _, s := range st {
		if s.UUID == u0 {
			assert.Empty(t, s.Abandoned, "cn0, taken back by a job of p2, is abandoned again for p1 by the next pass (its job %s %s)", s.Job, s.JobState)
		}
	}
}

// TestReview38_ShowSaysAbandonedOffServerHoldsSlot (review 38 round 3):
// at -N 1 cn0's BMC went dead after its power-off landed; the operator
// abandons cn0. cn0 is off and counts offline for ever (the executor never
// powers it on again), so the plan waits for good with "waiting: 1
// server(s) offline (0 rebooting, 1 down or unknown for other reasons)",
// which does not name cn0. What `plan show`/`watch` says of cn0 is only
// that the executor never powers it on or off again: not that it holds a
// slot while it is off, nor the fix (power it on by hand, or raise the
// concurrency). Issue 38 point 1: the slot must not wait beyond a bound
// the operator sees.
func TestReview38_ShowSaysAbandonedOffServerHoldsSlot(t *testing.T) {
	now := time.Now()
	s := &executorStatus{Servers: []inventory.ServerStatus{{UUID: "u0", Hostname: "cn0", Job: "j1", JobState: inventory.JobFailed,
		Phase: "powering off: reads off", PhaseSince: now.Add(-time.Hour), Abandoned: "plan abandon at 2026-11-26T03:00:00Z by alice"}}}
	notes := strings.Join(serverNotes(s, "u0", now), "\n")
	assert.Contains(t, notes, "offline", "show does not say the abandoned server counts offline while it is off:\n%s", notes)
	assert.Contains(t, notes, "by hand", "show does not give the fix (power it on by hand):\n%s", notes)
}
