package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_CreateAfterRestoreOverlapsPlan (review 37 round 7, the
// revision-only compares after a restore): Create checks the unfinished
// plans at revision L (checkOthers), writes its pages, then its header in
// a transaction that compares that no header was created since L
// (CreateRevision(headers/) < L+1, store.go), so that two overlapping
// plans created at once cannot both succeed (doc.go). When etcd is
// restored from a backup of its data directory while a Create is under
// way (revisions go back and are given again: the case token.go guards
// against for every other write), a plan created after the restore has a
// CreateRevision below L: the compare holds and both plans are created
// over the same servers, each running its own concurrency over them.
// Ground truth: a fresh store's Get of both plans.
func TestReview37_CreateAfterRestoreOverlapsPlan(t *testing.T) {
	r := newRestorable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pre = "/r/"
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 10, "").Servers()
	opCli := r.dial()
	_, err := NewStore(opCli, pre).Unfinished(ctx) // the index marker
	require.NoError(t, err)

	r.saveBackup()
	r.waitUp(ctx, opCli)
	// Other writes (anything in the etcd) after the backup.
	for i := range 20 {
		_, err := opCli.Put(ctx, fmt.Sprintf("/other/%d", i), "x")
		require.NoError(t, err)
	}

	// Operator A creates plan "a"; after its check of the other plans,
	// before its first write, etcd is restored and operator B creates
	// plan "b" over the same servers.
	acli := r.dial()
	r.waitUp(ctx, acli)
	var bErr error
	hook := &beforePutKV{KV: acli.KV}
	hook.before = func() {
		r.restoreBackup()
		bcli := r.dial()
		r.waitUp(ctx, bcli)
		bErr = NewStore(bcli, pre).Create(ctx, runningPlan(t, "b", servers, 2, clk.Now()))
		r.waitUp(ctx, acli)
	}
	acli.KV = hook
	aErr := NewStore(acli, pre).Create(ctx, runningPlan(t, "a", servers, 2, clk.Now()))
	require.Nil(t, hook.before, "etcd was restored during A's Create")
	require.NoError(t, bErr, "B's Create, after the restore")

	truth := NewStore(r.dial(), pre)
	_, errA := truth.Get(ctx, "a")
	_, errB := truth.Get(ctx, "b")
	t.Logf("A's Create: %v; stored: a %v, b %v", aErr, errA, errB)
	assert.False(t, errA == nil && errB == nil, "two unfinished plans over the same 10 servers are stored")
	assert.ErrorIs(t, aErr, plan.ErrServerInPlan, "A's Create")
}

// beforePutKV runs before, once, at the commit of the first transaction
// that writes (a Put).
type beforePutKV struct {
	clientv3.KV
	before func()
}

func (h *beforePutKV) Txn(ctx context.Context) clientv3.Txn {
	return &putTxn{Txn: h.KV.Txn(ctx), h: h}
}

type putTxn struct {
	clientv3.Txn
	h    *beforePutKV
	puts bool
}

func (t *putTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *putTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.puts = t.puts || op.IsPut()
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *putTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *putTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.puts && t.h.before != nil {
		f := t.h.before
		t.h.before = nil
		f()
	}
	return t.Txn.Commit()
}

// TestReview37_SweepOrphansAfterRestoreDeletesCreate (review 37 round 7,
// revision-only compares after a restore): Maintain passes SweepOrphans
// the revision its previous call read at (Leadership.swept), and
// SweepOrphans deletes the pages of every UUID without a header all of
// whose keys have a ModRevision at or below it: "so that a Create in
// progress keeps its pages". After etcd is restored from a backup of its
// data directory (revisions go back), a leader that kept its lease (it
// is in the backup) passes a revision above every one the restored etcd
// gives for a while: the pages of a Create under way are deleted at
// once, and the Create fails (its header's compare of page 0) although it
// took milliseconds, not the ten minutes the doc allows. Ground truth: the
// plan read by a fresh store.
func TestReview37_SweepOrphansAfterRestoreDeletesCreate(t *testing.T) {
	r := newRestorable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pre = "/r/"
	clk := fake.NewClock(time.Time{})
	opCli := r.dial()
	_, err := NewStore(opCli, pre).Unfinished(ctx) // the index marker
	require.NoError(t, err)
	r.saveBackup()
	r.waitUp(ctx, opCli)
	for i := range 20 {
		_, err := opCli.Put(ctx, fmt.Sprintf("/other/%d", i), "x")
		require.NoError(t, err)
	}
	// The leader's Maintain before the restore.
	_, before, err := NewStore(opCli, pre).SweepOrphans(ctx, 0)
	require.NoError(t, err)
	r.restoreBackup()
	r.waitUp(ctx, opCli)

	// A Create after the restore; the leader's next Maintain runs between
	// its pages and its header.
	acli := r.dial()
	r.waitUp(ctx, acli)
	var swept int
	var sweepErr error
	writes := 0
	acli.KV = &countPutKV{KV: acli.KV, at: 2, f: func() {
		swept, _, sweepErr = NewStore(opCli, pre).SweepOrphans(ctx, before)
	}, n: &writes}
	aErr := NewStore(acli, pre).Create(ctx, runningPlan(t, "a", fleetOf(clk, "a", 10, "").Servers(), 2, clk.Now()))
	require.NoError(t, sweepErr)
	require.GreaterOrEqual(t, writes, 2, "the sweep ran before the header's transaction")
	t.Logf("SweepOrphans(%d) deleted %d keys; the Create wrote %d transactions", before, swept, writes)
	assert.NoError(t, aErr, "a Create of milliseconds after the restore")
	_, err = NewStore(r.dial(), pre).Get(ctx, "a")
	assert.NoError(t, err, "ground truth: the plan created")
}

// countPutKV runs f once, before the commit of the at-th transaction that
// writes (a Put), counting them in n.
type countPutKV struct {
	clientv3.KV
	at int
	n  *int
	f  func()
}

func (h *countPutKV) Txn(ctx context.Context) clientv3.Txn {
	k := &beforePutKV{KV: h.KV}
	k.before = func() {
		*h.n++
		if *h.n == h.at && h.f != nil {
			f := h.f
			h.f = nil
			f()
		}
	}
	return &putTxn{Txn: h.KV.Txn(ctx), h: k}
}
