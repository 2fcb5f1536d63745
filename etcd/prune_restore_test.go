package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_PruneAfterRestoreOverwritesRunningPlan (review of issue
// 37, round 6, the unproven Low): Prune compared only the header's
// ModRevision with the one it read, not the token of the write. When
// etcd is restored from a backup of its data directory between Prune's
// read and its write (revisions go back and are given again), another
// writer's write can land at the very revision Prune read: here the
// executor's pass that starts two reboots of the plan the restore brought
// back running, at the revision of the cancel Prune had read. Prune's
// compare-and-swap then held, and it wrote the canceled header it read
// (with the time of its end) over the pass's: the plan reads canceled with
// nothing in flight while two servers reboot, nobody watches them, and the
// next Prune after the retention deletes the plan. Ground truth: a fresh
// store's read of the header, and the fake fleet's jobs.
func TestReview37_PruneAfterRestoreOverwritesRunningPlan(t *testing.T) {
	r := newRestorable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pre, uuid = "/r/", "pruned"
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, uuid, 10, "")
	opCli := r.dial()
	require.NoError(t, NewStore(opCli, pre).Create(ctx, runningPlan(t, uuid, fleet.Servers(), 2, clk.Now())))

	// The operator backs up etcd's data directory, then cancels the plan
	// (nothing in flight yet: it ended).
	r.saveBackup()
	r.waitUp(ctx, opCli)
	_, err := plan.Command(ctx, NewStore(opCli, pre), uuid, plan.Cancel)
	require.NoError(t, err)
	headerRev := func(cli *clientv3.Client) int64 {
		resp, err := cli.Get(ctx, pre+"headers/"+uuid)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		return resp.Kvs[0].ModRevision
	}
	canceledAt := headerRev(opCli)

	// Between Prune's read of the headers and its write, etcd is restored
	// (the plan running again) and the executor's pass starts two reboots,
	// written at the revision of the cancel.
	pcli := r.dial()
	r.waitUp(ctx, pcli)
	hook := &afterReadKV{KV: pcli.KV}
	hook.before = func() {
		r.restoreBackup()
		exCli := r.dial()
		r.waitUp(ctx, exCli)
		ex := &plan.Executor{Fleet: fleet, Store: NewStore(exCli, pre), Now: clk.Now}
		_, err := ex.Pass(ctx, uuid)
		require.NoError(t, err)
		require.Len(t, fleet.JobsCreated(), 2)
		require.Equal(t, canceledAt, headerRev(exCli), "the pass's write has the revision of the cancel Prune read")
		r.waitUp(ctx, pcli)
	}
	pcli.KV = hook
	_, _ = NewStore(pcli, pre).Prune(ctx, clk.Now(), clk.Now().Add(time.Hour))
	require.Nil(t, hook.before, "etcd was restored between Prune's read and its write")

	truth := func() plan.View {
		v, err := NewStore(r.dial(), pre).GetHead(ctx, uuid)
		require.NoError(t, err)
		return v
	}
	v := truth()
	assert.Equal(t, plan.StateRunning, v.State, "the pass's write stays: the plan runs")
	assert.Len(t, v.Index.InFlight, 2, "the two reboots started are in flight")

	// Later Prunes leave the running plan whole.
	for i := 0; i < 2; i++ {
		clk.Advance(time.Hour)
		_, err := NewStore(r.dial(), pre).Prune(ctx, clk.Now(), clk.Now().Add(time.Hour))
		require.NoError(t, err)
	}
	v = truth()
	assert.Len(t, v.Index.InFlight, 2, "the reboots in flight are still the plan's")
}

// afterReadKV runs before, once, at the first transaction begun after a
// read (a Get, or a transaction committed).
type afterReadKV struct {
	clientv3.KV
	read   bool
	before func()
}

func (h *afterReadKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	h.read = true
	return h.KV.Get(ctx, key, opts...)
}

func (h *afterReadKV) Txn(ctx context.Context) clientv3.Txn {
	if h.read && h.before != nil {
		f := h.before
		h.before = nil
		f()
	}
	return readTxn{Txn: h.KV.Txn(ctx), h: h}
}

// readTxn is a transaction whose commit counts as a read (afterReadKV).
type readTxn struct {
	clientv3.Txn
	h *afterReadKV
}

func (t readTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return readTxn{Txn: t.Txn.If(cs...), h: t.h} }
func (t readTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return readTxn{Txn: t.Txn.Then(ops...), h: t.h}
}
func (t readTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return readTxn{Txn: t.Txn.Else(ops...), h: t.h}
}

func (t readTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	t.h.read = true
	return resp, err
}
