package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

func testPlan(t testing.TB, uuid string, n, conc int) plan.Plan {
	t.Helper()
	var fleet []plan.Server
	for i := 0; i < n; i++ {
		fleet = append(fleet, plan.Server{UUID: fmt.Sprintf("%s-s%05d", uuid, i), Hostname: fmt.Sprintf("%s-h%05d", uuid, i), Platform: "1", Core: i < 2, Headnode: i == 0})
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(conc), CreatedAt: time.Unix(1, 0).UTC()})
	require.NoError(t, err)
	return p
}

func prefix(t testing.TB) string { return fmt.Sprintf("/test/%s/%d/", t.Name(), time.Now().UnixNano()) }

func TestStoreBasics(t *testing.T) {
	ctx := context.Background()
	s := NewStore(newClient(t), prefix(t))
	p := testPlan(t, "p1", 70, 3) // three pages
	require.NoError(t, s.Create(ctx, p))
	require.NoError(t, s.Create(ctx, p), "the same request again (issue 37)")
	assert.ErrorIs(t, s.Create(ctx, testPlan(t, "p1", 3, 1)), plan.ErrExists)
	q := testPlan(t, "p2", 3, 1)
	q.Reboots[2].ServerUUID = p.Reboots[5].ServerUUID
	assert.ErrorIs(t, s.Create(ctx, q), plan.ErrServerInPlan)

	got, err := s.Get(ctx, "p1")
	require.NoError(t, err)
	p.Version = got.Version
	assert.Equal(t, p, got)
	_, err = s.Get(ctx, "nope")
	assert.ErrorIs(t, err, plan.ErrNotFound)

	// Compare-and-swap.
	got.State = plan.StateRunning
	require.NoError(t, s.Put(ctx, got))
	assert.ErrorIs(t, s.Put(ctx, got), plan.ErrConflict)
	c, err := plan.Command(ctx, s, "p1", plan.Stop)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, c.State)

	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	un, err := s.Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"p1"}, un)
}

// TestStoreViews: a view is the header and the pages of the reboots in
// flight and next; NextView on it and PutView give the same plan as Next
// on the whole plan and Put.
func TestStoreViews(t *testing.T) {
	ctx := context.Background()
	s := NewStore(newClient(t), prefix(t))
	p := testPlan(t, "v", 100, 4)
	p.State = plan.StateRunning
	require.NoError(t, s.Create(ctx, p))
	now := time.Unix(1000, 0).UTC()
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true}
	for _, r := range p.Reboots {
		obs.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
	}
	for step := 0; step < 30; step++ {
		v, err := s.GetView(ctx, "v")
		require.NoError(t, err)
		whole, err := s.Get(ctx, "v")
		require.NoError(t, err)
		assert.Equal(t, plan.IndexOf(whole), v.Index, "the stored index matches the pages")
		want, _ := plan.Next(whole, obs, now)
		q, _ := plan.Config{}.NextView(v, obs, now)
		require.NoError(t, s.PutView(ctx, q))
		got, err := s.Get(ctx, "v")
		require.NoError(t, err)
		want.Version = got.Version
		require.Equal(t, want, got, "step %d", step)
		// Jobs finish a step later.
		for _, r := range got.Reboots {
			if r.JobUUID != "" {
				obs.Jobs[r.JobUUID] = plan.JobObs{Exists: true, Started: true, Drained: true, Finished: true}
			}
		}
		now = now.Add(time.Minute)
	}
	v, err := s.GetView(ctx, "v")
	require.NoError(t, err)
	assert.ErrorIs(t, s.PutView(ctx, v), nil)
	assert.ErrorIs(t, s.PutView(ctx, v), plan.ErrConflict, "stale view")
}

// TestStoreGuard: writes through a guarded store fail with ErrNotLeader
// once the guard's key is gone, whatever the writer believes.
func TestStoreGuard(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	_, err = cli.Put(ctx, pre+"leader", "me", clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	g, err := cli.Get(ctx, pre+"leader")
	require.NoError(t, err)
	s := NewStore(cli, pre).Guarded(clientv3.Compare(clientv3.CreateRevision(pre+"leader"), "=", g.Kvs[0].CreateRevision))
	require.NoError(t, s.Create(ctx, testPlan(t, "g", 5, 1)))
	p, err := s.Get(ctx, "g")
	require.NoError(t, err)
	p.State = plan.StateRunning
	require.NoError(t, s.Put(ctx, p))
	_, err = cli.Revoke(ctx, lease.ID) // the lease expires
	require.NoError(t, err)
	p, err = s.Get(ctx, "g")
	require.NoError(t, err)
	p.State = plan.StateStopped
	assert.ErrorIs(t, s.Put(ctx, p), ErrNotLeader)
	assert.ErrorIs(t, s.Create(ctx, testPlan(t, "g2", 5, 1)), ErrNotLeader)
	v, err := s.GetView(ctx, "g")
	require.NoError(t, err)
	assert.ErrorIs(t, s.PutView(ctx, v), ErrNotLeader)
	// Operators write without a guard, and are never refused for it.
	_, err = plan.Command(ctx, NewStore(cli, pre), "g", plan.Cancel)
	require.NoError(t, err)
}
