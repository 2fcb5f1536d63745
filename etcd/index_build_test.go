package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestIndexBuildBatchUndoneStartsAgain (issue 37, review round 7,
// findings 2-3): a prefix of more headers than one transaction compares
// is indexed in batches; when the keys an earlier batch wrote are undone
// before the next batch (etcd restored from a backup taken before it: the
// build key goes back with them), the next batch's compare of the build
// key fails and the build starts again, so the marker never says complete
// over an index without a running plan. Ground truth: the index keys read
// directly.
func TestIndexBuildBatchUndoneStartsAgain(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	cli := newClient(t)
	plain := NewStore(cli, pre)
	require.NoError(t, plain.Create(ctx, runningPlan(t, "live", fleetOf(clk, "live", 4, "").Servers(), 2, clk.Now())))
	resp, err := cli.Get(ctx, plain.headerKey("live"))
	require.NoError(t, err)
	var h header
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &h))
	h.Plan.State = plan.StateComplete
	for i := range 130 { // finished plans after "live": three batches
		h.Plan.UUID = fmt.Sprintf("old%03d", i)
		raw, err := json.Marshal(h)
		require.NoError(t, err)
		_, err = cli.Put(ctx, plain.headerKey(h.Plan.UUID), string(raw))
		require.NoError(t, err)
	}
	_, err = cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
	require.NoError(t, err)

	batches := 0
	var undoErr error
	hooked := hookClient(t, func(req any) error {
		r, ok := req.(*pb.TxnRequest)
		if !ok {
			return nil
		}
		for _, op := range r.Success {
			if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), pre+"unfinished") {
				batches++
				if batches == 2 {
					// The first batch undone, as a restore of a backup
					// taken before it would.
					_, undoErr = cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
				}
				return nil
			}
		}
		return nil
	}, nil)
	uuids, err := NewStore(hooked, pre).Unfinished(ctx)
	require.NoError(t, err)
	require.NoError(t, undoErr)
	require.GreaterOrEqual(t, batches, 3, "the build ran in batches")
	assert.Equal(t, []string{"live"}, uuids)
	ix, err := cli.Get(ctx, plain.indexKey("live"), clientv3.WithKeysOnly())
	require.NoError(t, err)
	assert.Len(t, ix.Kvs, 1, "ground truth: the index key of the running plan")
	build, err := cli.Get(ctx, plain.indexMarker()+"-build", clientv3.WithKeysOnly())
	require.NoError(t, err)
	assert.Empty(t, build.Kvs, "the build key is deleted with the marker's batch")
}
