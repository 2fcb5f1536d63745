package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// policyPlan is a running plan with every policy field that points to
// memory (conditions and their commands, the ramp, the domain limits, the
// windows).
func policyPlan(t *testing.T, uuid string) plan.Plan {
	t.Helper()
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, uuid, 40, "")
	p := runningPlan(t, uuid, fleet.Servers(), 4, clk.Now())
	p.Conditions = []plan.Condition{{Name: "no-alerts", Command: []string{"check-alerts", "--strict"}}}
	p.Ramp = []int{1, 2}
	p.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: 1}}
	p.Windows = &plan.Windows{Weekly: []string{"daily 22:00-23:00"}}
	require.NoError(t, p.Validate())
	return p
}

// mutatePolicy changes, in place, what p's policy fields point to, as a
// caller owning its copy may.
func mutatePolicy(p plan.Plan) {
	p.Conditions[0].Command[0] = "true"
	p.Ramp[0] = 40
	p.DomainLimits[0].Max = 40
	p.Windows.Weekly[0] = "daily 00:00-23:59"
}

// TestReview37_HeaderServedFromMemoryAliasesCaller (review 37 round 4):
// GetHead and GetView say the caller gets its own copy of the header the
// store keeps (knownHead), but Plan.Clone shares the conditions, the
// ramp, the domain limits and the windows: a caller that changes its copy
// changes what the store serves to its next reader while etcd holds the
// plan unchanged (ground truth: a fresh store's read). Before the
// known-header cache every read decoded its own header.
func TestReview37_HeaderServedFromMemoryAliasesCaller(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, policyPlan(t, "alias")))
	truth := func() plan.Plan {
		v, err := NewStore(newClient(t), pre).GetHead(ctx, "alias")
		require.NoError(t, err)
		return v.Plan
	}
	want := truth()

	s := NewStore(newClient(t), pre)
	h, err := s.GetHead(ctx, "alias")
	require.NoError(t, err)
	mutatePolicy(h.Plan)
	again, err := s.GetHead(ctx, "alias")
	require.NoError(t, err)
	assert.Equal(t, want.Conditions, again.Conditions, "GetHead after a caller changed its copy: conditions")
	assert.Equal(t, want.Ramp, again.Ramp, "GetHead: ramp")
	assert.Equal(t, want.DomainLimits, again.DomainLimits, "GetHead: domain limits")
	assert.Equal(t, want.Windows, again.Windows, "GetHead: windows")

	s2 := NewStore(newClient(t), pre)
	v, err := s2.GetView(ctx, "alias")
	require.NoError(t, err)
	mutatePolicy(v.Plan)
	v2, err := s2.GetView(ctx, "alias")
	require.NoError(t, err)
	assert.Equal(t, want.Conditions, v2.Conditions, "GetView after a caller changed its copy: conditions")
	assert.Equal(t, want.Windows, v2.Windows, "GetView: windows")
	assert.Equal(t, want.Conditions, truth().Conditions, "etcd holds the plan unchanged")
}

// TestReview37_KnownHeaderOfPlanEndedElsewhereNeverEvicted (review 37
// round 4): with more unfinished plans than one transaction's worth
// (maxTxnOps-2 = 98), Unfinished reads the revisions of only the first 98
// known plans (sorted), and evicts a known plan the index no longer names
// only among those: a plan beyond them that another writer ended (an
// operator's cancel) keeps its header and its last view's pages in the
// executor's caches for as long as the process lives (issue 37 point 3:
// per-plan caches are evicted when a plan ends). Ground truth: the index
// (a fresh store's Unfinished) no longer names the plan.
func TestReview37_KnownHeaderOfPlanEndedElsewhereNeverEvicted(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	op := NewStore(newClient(t), pre)
	const n = 101
	var uuids []string
	for i := 0; i < n; i++ {
		uuid := fmt.Sprintf("many%03d", i)
		require.NoError(t, op.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 1, "").Servers(), 1, clk.Now())))
		uuids = append(uuids, uuid)
	}
	exec := NewStore(newClient(t), pre)
	got, err := exec.Unfinished(ctx)
	require.NoError(t, err)
	require.Len(t, got, n)
	first, last := uuids[0], uuids[n-1]
	for _, uuid := range []string{first, last} {
		_, err := exec.GetView(ctx, uuid) // the executor's pass read it
		require.NoError(t, err)
		_, err = plan.Command(ctx, op, uuid, plan.Cancel) // the operator ends it
		require.NoError(t, err)
	}
	truth, err := NewStore(newClient(t), pre).Unfinished(ctx)
	require.NoError(t, err)
	require.NotContains(t, truth, first)
	require.NotContains(t, truth, last, "ended: the index no longer names it")
	for i := 0; i < 3; i++ { // the executor's loop
		_, err = exec.Unfinished(ctx)
		require.NoError(t, err)
	}
	exec.cache.mu.Lock()
	_, knownFirst := exec.cache.known[first]
	_, knownLast := exec.cache.known[last]
	_, viewedLast := exec.cache.viewed[last]
	nKnown := len(exec.cache.known)
	exec.cache.mu.Unlock()
	assert.False(t, knownFirst, "%s ended elsewhere: evicted", first)
	assert.False(t, knownLast, "%s ended elsewhere: its header is still kept", last)
	assert.False(t, viewedLast, "%s ended elsewhere: its last view's pages are still kept", last)
	assert.Equal(t, n-2, nKnown, "known headers: only the unfinished plans")
}
