package etcd

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestRestoredEtcdStaleVersionWriteRefused (issue 37, review round 4,
// point 1, the write side): an executor read the plan (GetView, GetHead,
// Get) at the version of its own last write; etcd is then restored from a
// copy of its data directory taken before that write, and the operator's
// stop lands at the very revision the executor read. The executor's
// writes of the versions it read before the restore must be refused
// (plan.ErrConflict): with the revision alone as the version, PutView's
// compare-and-swap succeeded and wrote "running" over the stop. Ground
// truth: a fresh store's read, and the header's ModRevision read directly.
func TestRestoredEtcdStaleVersionWriteRefused(t *testing.T) {
	r := newRestorable(t)
	dial := r.dial
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitUp := func(cli *clientv3.Client) { r.waitUp(ctx, cli) }
	const pre, uuid = "/r/", "stale"
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, uuid, 10, "")
	require.NoError(t, NewStore(dial(), pre).Create(ctx, runningPlan(t, uuid, fleet.Servers(), 2, clk.Now())))

	r.saveBackup()

	exCli := dial()
	waitUp(exCli)
	st := NewStore(exCli, pre)
	v, err := st.GetView(ctx, uuid)
	require.NoError(t, err)
	require.NoError(t, st.PutView(ctx, v)) // the executor's write, after the backup
	v, err = st.GetView(ctx, uuid)
	require.NoError(t, err)
	hv, err := st.GetHead(ctx, uuid)
	require.NoError(t, err)
	p, err := st.Get(ctx, uuid)
	require.NoError(t, err)
	read, _, _ := strings.Cut(v.Version, ".")

	r.restoreBackup()
	waitUp(exCli)

	opCli := dial()
	_, err = plan.Command(ctx, NewStore(opCli, pre), uuid, plan.Stop)
	require.NoError(t, err)
	resp, err := opCli.Get(ctx, pre+"headers/"+uuid)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, read, strconv.FormatInt(resp.Kvs[0].ModRevision, 10), "the stop landed at the revision the executor read (the case under test)")

	truth := func() plan.State {
		h, err := NewStore(dial(), pre).GetHead(ctx, uuid)
		require.NoError(t, err)
		return h.State
	}
	require.Equal(t, plan.StateStopped, truth())
	require.ErrorIs(t, st.PutView(ctx, v), plan.ErrConflict, "PutView of a version read before the restore")
	require.Equal(t, plan.StateStopped, truth(), "the stop stays after PutView")
	require.ErrorIs(t, st.PutHead(ctx, hv), plan.ErrConflict, "PutHead of a version read before the restore")
	require.ErrorIs(t, st.Put(ctx, p), plan.ErrConflict, "Put of a version read before the restore")
	require.Equal(t, plan.StateStopped, truth(), "the operator's stop stays")
}
