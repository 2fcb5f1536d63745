package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_TokenValueWedgesStop (review 37 round 5): the write token
// is a value read from etcd, and the version built from it
// ("REVISION.TOKEN", token.go) is parsed back with the assumption that a
// token never holds a "." and is never empty. A token key whose value is
// "" (sameToken then compares that the key does not exist, which it does)
// or holds a "." (parseVersion refuses the version) makes every
// compare-and-swap of the plan fail with plan.ErrConflict, for ever,
// including on a fresh read: the operator's stop never lands (plan.Command
// gives up after its tries) and the executor's every PutView is refused.
// A header whose value were garbage would be reported corrupt; here the
// header is fine and nothing says what is wrong. Ground truth: a fresh
// store's GetHead after the command.
func TestReview37_TokenValueWedgesStop(t *testing.T) {
	for name, val := range map[string]string{"empty": "", "dotted": "ab.cd"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			pre := prefix(t)
			clk := fake.NewClock(time.Time{})
			uuid := "tok" + name
			cli := newClient(t)
			s := NewStore(cli, pre)
			require.NoError(t, s.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))
			// The token key's value as another tool (or a hand) left it.
			_, err := cli.Put(ctx, s.tokenKey(uuid), val)
			require.NoError(t, err)

			op := NewStore(newClient(t), pre)
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err = plan.Command(cctx, op, uuid, plan.Stop)
			cancel()
			assert.NoError(t, err, "the operator's stop on a plan whose token is %q", val)
			h, err := NewStore(newClient(t), pre).GetHead(ctx, uuid)
			require.NoError(t, err)
			assert.Equal(t, plan.StateStopped, h.State, "stored state after the stop")
		})
	}
}

// TestReview37_ListedPlanEndedElsewhereCachesNeverEvicted (review 37 round
// 5): List keeps, for every unfinished plan, its member map (one entry per
// server: megabytes at 100,000 servers) and the hashes of every page
// (cache.m, cache.loaded), but not its header (cache.known). Unfinished
// evicts only the plans in cache.known, and List, once the plan ended,
// neither keeps nor forgets it: a plan another writer ended stays in a
// listing process's caches for as long as it lives (issue 37 point 3:
// per-plan caches are evicted when a plan ends). Ground truth: a fresh
// store's Unfinished no longer names the plan.
func TestReview37_ListedPlanEndedElsewhereCachesNeverEvicted(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	op := NewStore(newClient(t), pre)
	const uuid = "listed"
	require.NoError(t, op.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))

	lister := NewStore(newClient(t), pre)
	_, err := lister.List(ctx)
	require.NoError(t, err)

	_, err = plan.Command(ctx, op, uuid, plan.Cancel) // ended elsewhere
	require.NoError(t, err)
	truth, err := NewStore(newClient(t), pre).Unfinished(ctx)
	require.NoError(t, err)
	require.NotContains(t, truth, uuid, "ended: the index no longer names it")

	for i := 0; i < 3; i++ {
		_, err = lister.Unfinished(ctx)
		require.NoError(t, err)
		_, err = lister.List(ctx)
		require.NoError(t, err)
	}
	lister.cache.mu.Lock()
	_, members := lister.cache.m[uuid]
	_, loaded := lister.cache.loaded[uuid]
	lister.cache.mu.Unlock()
	assert.False(t, members, "%s ended elsewhere: its member map is still kept", uuid)
	assert.False(t, loaded, "%s ended elsewhere: its page hashes are still kept", uuid)
}
