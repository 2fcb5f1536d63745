package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// restoreRace is the scene of the restore reviews (review 37, rounds 6
// and 7): a plan running two at a time over a simulated fleet of 10, in a
// restorable etcd (prefix "/r/"); the operator backs up etcd's data
// directory, then cancels the plan (nothing in flight yet). A reader's
// client (hooked) then has etcd restored under it between its read and
// its write, with the executor's pass starting two reboots of the plan
// running again, written at the revision of the cancel (canceledAt).
type restoreRace struct {
	t          *testing.T
	ctx        context.Context
	r          *restorable
	pre, uuid  string
	clk        *fake.Clock
	fleet      *fake.Fleet
	canceledAt int64
}

// newRestoreRace sets the scene for plan uuid; prepare (nil: nothing)
// runs with the operator's client and the prefix after the plan is
// created, before the backup.
func newRestoreRace(t *testing.T, ctx context.Context, uuid string, prepare func(opCli *clientv3.Client, pre string)) *restoreRace {
	t.Helper()
	s := &restoreRace{t: t, ctx: ctx, r: newRestorable(t), pre: "/r/", uuid: uuid, clk: fake.NewClock(time.Time{})}
	s.fleet = fleetOf(s.clk, uuid, 10, "")
	opCli := s.r.dial()
	require.NoError(t, NewStore(opCli, s.pre).Create(ctx, runningPlan(t, uuid, s.fleet.Servers(), 2, s.clk.Now())))
	if prepare != nil {
		prepare(opCli, s.pre)
	}

	s.r.saveBackup()
	s.r.waitUp(ctx, opCli)
	_, err := plan.Command(ctx, NewStore(opCli, s.pre), uuid, plan.Cancel)
	require.NoError(t, err)
	s.canceledAt = s.headerRev(opCli)
	return s
}

// headerRev is the ModRevision of the plan's header, read through cli.
func (s *restoreRace) headerRev(cli *clientv3.Client) int64 {
	resp, err := cli.Get(s.ctx, s.pre+"headers/"+s.uuid)
	require.NoError(s.t, err)
	require.Len(s.t, resp.Kvs, 1)
	return resp.Kvs[0].ModRevision
}

// hooked returns a client of its own whose first transaction begun after
// a read (a Get; with commitReads also a committed transaction) first
// restores the backup and runs the executor's pass (two reboots started,
// the header written at canceledAt: reader, in the failure message, names
// the code whose read that is). The hook's before is nil once it ran.
func (s *restoreRace) hooked(reader string, commitReads bool) (*clientv3.Client, *afterReadKV) {
	cli := s.r.dial()
	s.r.waitUp(s.ctx, cli)
	hook := &afterReadKV{KV: cli.KV, commitReads: commitReads}
	hook.before = func() {
		s.r.restoreBackup()
		exCli := s.r.dial()
		s.r.waitUp(s.ctx, exCli)
		ex := &plan.Executor{Fleet: s.fleet, Store: NewStore(exCli, s.pre), Now: s.clk.Now}
		_, err := ex.Pass(s.ctx, s.uuid)
		require.NoError(s.t, err)
		require.Len(s.t, s.fleet.JobsCreated(), 2)
		require.Equal(s.t, s.canceledAt, s.headerRev(exCli), "the pass's write has the revision of the cancel "+reader+" read")
		s.r.waitUp(s.ctx, cli)
	}
	cli.KV = hook
	return cli, hook
}

// afterReadKV runs before, once, at the first transaction begun after a
// read: a Get, or with commitReads a transaction committed.
type afterReadKV struct {
	clientv3.KV
	commitReads bool
	read        bool
	before      func()
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
	if !h.commitReads {
		return h.KV.Txn(ctx)
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
