package etcd

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

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

// hookKV runs before, once, at the first Txn after a Get: between Sweep's
// read of the page keys and its delete.
type hookKV struct {
	clientv3.KV
	got    bool
	before func()
}

func (h *hookKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	h.got = true
	return h.KV.Get(ctx, key, opts...)
}

func (h *hookKV) Txn(ctx context.Context) clientv3.Txn {
	if h.got && h.before != nil {
		f := h.before
		h.before = nil
		f()
	}
	return h.KV.Txn(ctx)
}

// TestReview37_SweepDeletesPageRenamedMeanwhile (review 37 round 5): Sweep
// reads the header, lists the page keys and deletes the ones the header
// does not name, in a plain transaction that compares nothing: not the
// header's revision and token, not the guard (a deposed leader's Maintain
// deletes too). A page key it found unnamed (the plan's own key of a page
// a large write had put under an overlay, left behind by a writer that
// died before deleting it, which is what Sweep is for) is named again by
// the next write of that page that fits one transaction (writeRev puts
// the page back under the plan's nonce and drops the overlay). When that
// write lands between Sweep's read and its delete (the operator's Edit, or
// the new leader's pass while a deposed leader still sweeps), Sweep
// deletes the page the header names: the plan is corrupt for good (page
// missing) and no pass runs it again. Ground truth: a fresh store's Get.
func TestReview37_SweepDeletesPageRenamedMeanwhile(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "swept"
	cli := newClient(t)
	s := NewStore(cli, pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 40, "").Servers(), 2, clk.Now())))

	// What a write too large for one transaction leaves when its writer
	// dies before deleting the keys it replaced: page 0 under an overlay,
	// the plan's own key of page 0 still there, unnamed.
	hr, err := cli.Get(ctx, s.headerKey(uuid))
	require.NoError(t, err)
	h, err := decodeHeader(uuid, hr.Kvs[0].Value)
	require.NoError(t, err)
	own := s.pageKey(uuid, h.Nonce, 0)
	pr, err := cli.Get(ctx, own)
	require.NoError(t, err)
	require.Len(t, pr.Kvs, 1)
	_, err = cli.Put(ctx, own+"/staged", string(pr.Kvs[0].Value))
	require.NoError(t, err)
	h.Over = map[int]string{0: "staged"}
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	putTok, _ := s.putToken(uuid)
	_, err = cli.Txn(ctx).Then(clientv3.OpPut(s.headerKey(uuid), string(raw)), putTok).Commit()
	require.NoError(t, err)
	_, err = NewStore(newClient(t), pre).Get(ctx, uuid)
	require.NoError(t, err, "the plan reads whole before the sweep")

	// The sweeper; another writer rewrites page 0 between its read and its
	// delete.
	scli := newClient(t)
	hook := &hookKV{KV: scli.KV}
	hook.before = func() {
		_, err := plan.Edit(ctx, NewStore(newClient(t), pre), uuid, func(p plan.Plan) (plan.Plan, error) {
			p.Reboots[0].Error = "noted by the operator"
			return p, nil
		})
		require.NoError(t, err)
	}
	scli.KV = hook
	_, err = NewStore(scli, pre).Sweep(ctx, uuid)
	require.NoError(t, err)
	require.Nil(t, hook.before, "the write ran between the sweep's read and its delete")

	p, err := NewStore(newClient(t), pre).Get(ctx, uuid)
	require.NoError(t, err, "the plan after the sweep: every page its header names is there")
	if err == nil {
		assert.Equal(t, "noted by the operator", p.Reboots[0].Error)
	}
}

// TestReview37_ViewOfEndedPlanCachesNeverEvicted (review 37 round 5):
// GetView of a plan that ended keeps its member map and its view's pages
// (cache.m, cache.viewed) but not its header (remember skips an ended
// plan), and Unfinished evicts only the plans whose header is kept: a
// process that shows plans (rebootctl's watch, a dashboard) keeps every
// ended plan it ever showed, a member map of one entry per server
// (issue 37 point 3: per-plan caches are evicted when a plan ends).
func TestReview37_ViewOfEndedPlanCachesNeverEvicted(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	op := NewStore(newClient(t), pre)
	const uuid = "shown"
	require.NoError(t, op.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))
	_, err := plan.Command(ctx, op, uuid, plan.Cancel)
	require.NoError(t, err)

	viewer := NewStore(newClient(t), pre)
	v, err := viewer.GetView(ctx, uuid)
	require.NoError(t, err)
	require.False(t, v.Unfinished(), "ended")
	for i := 0; i < 3; i++ {
		_, err = viewer.Unfinished(ctx)
		require.NoError(t, err)
	}
	viewer.cache.mu.Lock()
	_, members := viewer.cache.m[uuid]
	_, viewed := viewer.cache.viewed[uuid]
	viewer.cache.mu.Unlock()
	assert.False(t, members, "%s ended: its member map is kept", uuid)
	assert.False(t, viewed, "%s ended: its view's pages are kept", uuid)
}

// TestReview37_DeposedLeaderSweepDeletes (review 37 round 5): doc.go says
// the Leadership's Store adds the election key's comparison to every
// write, "so an executor that lost its lease can never write again". Sweep
// (Maintain) deletes through deleteKeys, which drops the guard: a store
// whose guard no longer holds still deletes page keys. Ground truth: the
// keys under the plan's pages before and after, read directly.
func TestReview37_DeposedLeaderSweepDeletes(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "deposed"
	cli := newClient(t)
	s := NewStore(cli, pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))
	// A key under the plan's pages that its header does not name (a
	// staged page left behind), written before the header's last write.
	_, err := cli.Put(ctx, pre+"pages/"+uuid+"/leftover/00000000", "{}")
	require.NoError(t, err)
	_, err = plan.Command(ctx, s, uuid, plan.Stop)
	require.NoError(t, err)
	_, before := prefixBytes(t, cli, pre+"pages/"+uuid+"/")

	// The election key it held is gone: its guard fails.
	deposed := NewStore(newClient(t), pre).Guarded(clientv3.Compare(clientv3.CreateRevision(pre+"election/gone"), ">", 0))
	n, err := deposed.Sweep(ctx, uuid)
	keys, after := prefixBytes(t, cli, pre+"pages/"+uuid+"/")
	assert.Equal(t, before, after, "a deposed leader's Sweep deleted %d keys (%d left), err %v", n, keys, err)
}
