package etcd

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// keysRead returns a client that records every key etcd's answers to its
// reads return (ground truth: what etcd sent, not what the store says it
// read), and a function that returns and resets them.
func keysRead(t testing.TB) (*clientv3.Client, func() []string) {
	t.Helper()
	return readsOf(t, false)
}

// valuesRead is keysRead recording only the keys etcd sent with a value
// (not those of keys-only reads, nor empty values).
func valuesRead(t testing.TB) (*clientv3.Client, func() []string) {
	t.Helper()
	return readsOf(t, true)
}

func readsOf(t testing.TB, valued bool) (*clientv3.Client, func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	add := func(kvs int, key func(i int) (string, bool)) {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < kvs; i++ {
			if k, v := key(i); !valued || v {
				seen = append(seen, k)
			}
		}
	}
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		ranges := func(r *pb.RangeResponse) {
			if r != nil {
				add(len(r.Kvs), func(i int) (string, bool) { return string(r.Kvs[i].Key), len(r.Kvs[i].Value) > 0 })
			}
		}
		switch r := reply.(type) {
		case *pb.RangeResponse:
			ranges(r)
		case *pb.TxnResponse:
			for _, op := range r.Responses {
				ranges(op.GetResponseRange())
			}
		}
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(icpt)}})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// endedPlans creates n plans of one server each and cancels them before
// anything started: they are ended (nothing in flight), retained.
func endedPlans(t *testing.T, s *Store, clk *fake.Clock, n int) []string {
	t.Helper()
	ctx := context.Background()
	var uuids []string
	for i := 0; i < n; i++ {
		uuid := "ended" + string(rune('a'+i))
		require.NoError(t, s.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 1, "").Servers(), 1, clk.Now())))
		_, err := plan.Command(ctx, s, uuid, plan.Cancel)
		require.NoError(t, err)
		h, err := s.GetHead(ctx, uuid)
		require.NoError(t, err)
		require.False(t, h.Unfinished(), "plan %s", uuid)
		uuids = append(uuids, uuid)
	}
	return uuids
}

// readAny reports the keys of read that belong to one of the plans uuids.
func readAny(read []string, pre string, uuids []string) []string {
	var out []string
	for _, k := range read {
		for _, u := range uuids {
			if strings.HasPrefix(k, pre+"headers/"+u) || strings.HasPrefix(k, pre+"pages/"+u+"/") {
				out = append(out, k)
			}
		}
	}
	return out
}

// TestUnfinishedReadsNoEndedPlan (issue 37, point 3): Unfinished, a
// leader's pass and Create's check of the other plans read the unfinished
// plans only: no header or page of a retained ended plan is in etcd's
// answers (the index of unfinished plans answers them). The old store
// read every header under headers/ on each of them, so a pass cost
// O(plans ever retained).
func TestUnfinishedReadsNoEndedPlan(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	s := NewStore(newClient(t), pre)
	done := endedPlans(t, s, clk, 4)
	fleet := fleetOf(clk, "live", 40, "")
	require.NoError(t, s.Create(ctx, runningPlan(t, "live", fleet.Servers(), 4, clk.Now())))

	cli, read := keysRead(t)
	counted := NewStore(cli, pre)
	uuids, err := counted.Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"live"}, uuids)
	assert.Empty(t, readAny(read(), pre, done), "Unfinished read ended plans")

	require.NoError(t, counted.Create(ctx, runningPlan(t, "other", fleetOf(clk, "other", 3, "").Servers(), 1, clk.Now())))
	assert.Empty(t, readAny(read(), pre, done), "Create's check read ended plans")

	c := Candidate{Client: cli, Prefix: pre, ID: "x", TTL: 60}
	sess, err := c.NewSession(ctx)
	require.NoError(t, err)
	defer sess.Close()
	l, err := c.Campaign(ctx, sess)
	require.NoError(t, err)
	read()
	for i := 0; i < 3; i++ {
		require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
		clk.Advance(30 * time.Second)
	}
	assert.Empty(t, readAny(read(), pre, done), "a pass read ended plans")
	require.NotEmpty(t, fleet.JobsCreated())

	// Heads lists every retained plan from its header alone.
	heads, err := counted.Heads(ctx)
	require.NoError(t, err)
	require.Len(t, heads, 6)
	for _, k := range read() {
		assert.False(t, strings.HasPrefix(k, pre+"pages/"), "Heads read page %s", k)
	}
	for _, h := range heads {
		assert.Empty(t, h.Reboots)
		assert.Equal(t, h.Index.Total, h.Summary().Total, h.UUID)
	}
}

// TestUnfinishedIndexFollowsEnd (issue 37, point 3): the index of
// unfinished plans follows a plan's end however it ends (a pass, an
// operator's cancel), and a store whose prefix holds plans written
// without the index (an older version) builds it once from the headers:
// no unfinished plan is ever left out of Unfinished.
func TestUnfinishedIndexFollowsEnd(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	s := NewStore(cli, pre)
	fleet := fleetOf(clk, "e", 8, "")
	require.NoError(t, s.Create(ctx, runningPlan(t, "e", fleet.Servers(), 8, clk.Now())))
	require.NoError(t, s.Create(ctx, runningPlan(t, "k", fleetOf(clk, "k", 2, "").Servers(), 1, clk.Now())))
	l, _ := lead(t, pre, "x", 60)
	require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
	got, err := s.Unfinished(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"e", "k"}, got)
	_, err = plan.Command(ctx, s, "k", plan.Cancel)
	require.NoError(t, err)
	got, err = s.Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"e"}, got)
	runToEnd(t, l, fleet, clk, s, "e")
	got, err = s.Unfinished(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)

	// Plans written by a store without the index: the index and its
	// marker deleted, one plan unfinished.
	require.NoError(t, s.Create(ctx, runningPlan(t, "old", fleetOf(clk, "old", 2, "").Servers(), 1, clk.Now())))
	_, err = cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
	require.NoError(t, err)
	got, err = NewStore(cli, pre).Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, got)
	got, err = NewStore(cli, pre).Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, got)
}

// TestGetDoesNotCacheEndedPlan (issue 37, point 3): a Get of a plan that
// ended leaves nothing in the store's caches (a report reading finished
// plans one by one does not fill memory). The old Get kept every plan it
// read.
func TestGetDoesNotCacheEndedPlan(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	s := NewStore(newClient(t), pre)
	done := endedPlans(t, s, clk, 2)
	fresh := NewStore(newClient(t), pre)
	for _, uuid := range done {
		p, err := fresh.Get(ctx, uuid)
		require.NoError(t, err)
		require.Len(t, p.Reboots, 1)
	}
	c := fresh.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.loaded, "whole reads cached")
	assert.Empty(t, c.m, "member maps cached")
}

// TestCreateAfterPruneNotRecreated (issue 37, points 3 and 4): a Create
// retried after its plan ended and was pruned succeeds without creating
// the plan again (its summary records the request), and another plan of
// that UUID is refused. The old store created the plan a second time: its
// servers rebooted twice.
func TestCreateAfterPruneNotRecreated(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s := NewStore(newClient(t), pre)
	fleet := fleetOf(clk, "p", 3, "")
	p := runningPlan(t, "p", fleet.Servers(), 3, clk.Now())
	require.NoError(t, s.Create(ctx, p))
	l, _ := lead(t, pre, "x", 60)
	runToEnd(t, l, fleet, clk, s, "p")
	_, err := l.Store.Prune(ctx, clk.Now(), clk.Now())
	require.NoError(t, err)
	clk.Advance(time.Hour)
	pruned, err := l.Store.Prune(ctx, clk.Now(), clk.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"p"}, pruned)

	require.NoError(t, s.Create(ctx, p), "the same request, retried")
	_, err = s.Get(ctx, "p")
	require.ErrorIs(t, err, plan.ErrNotFound, "the pruned plan was created again")
	keys, _ := prefixBytes(t, s.cli, pre+"pages/")
	assert.Zero(t, keys, "pages written again")
	other := runningPlan(t, "p", fleetOf(clk, "q", 2, "").Servers(), 1, clk.Now())
	require.ErrorIs(t, s.Create(ctx, other), plan.ErrExists)
}

// TestMaintainSweepsOrphanPages (issue 37, point 3): pages under a UUID
// with no header (a Create whose writer died before its header) are
// deleted by the leader's maintenance once older than the previous
// maintenance; younger ones (a Create in progress) stay. The old store
// swept only the pages of plans with a header: these stayed for good.
func TestMaintainSweepsOrphanPages(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	l, _ := lead(t, pre, "x", 60)
	clk := fake.NewClock(time.Time{})
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "kept", fleetOf(clk, "kept", 2, "").Servers(), 1, clk.Now())))
	old := pre + "pages/ghost/n1/00000000"
	_, err := cli.Put(ctx, old, "[]")
	require.NoError(t, err)
	require.NoError(t, l.Maintain(ctx, clk.Now(), time.Hour))
	young := pre + "pages/ghost2/n2/00000000"
	_, err = cli.Put(ctx, young, "[]")
	require.NoError(t, err)
	require.NoError(t, l.Maintain(ctx, clk.Now(), time.Hour))
	for k, want := range map[string]int{old: 0, young: 1} {
		resp, err := cli.Get(ctx, k)
		require.NoError(t, err)
		assert.Len(t, resp.Kvs, want, k)
	}
	got, err := l.Store.Get(ctx, "kept")
	require.NoError(t, err)
	assert.Len(t, got.Reboots, 2)
}
