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

// deleteHookKV runs before, once, when a transaction of deletes only is
// committed: a write's clean-up of the keys it stopped naming.
type deleteHookKV struct {
	clientv3.KV
	before func()
}

func (h *deleteHookKV) Txn(ctx context.Context) clientv3.Txn {
	return &deleteHookTxn{Txn: h.KV.Txn(ctx), kv: h}
}

type deleteHookTxn struct {
	clientv3.Txn
	kv  *deleteHookKV
	ops []clientv3.Op
}

func (t *deleteHookTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *deleteHookTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.ops = ops
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *deleteHookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *deleteHookTxn) Commit() (*clientv3.TxnResponse, error) {
	deletes := len(t.ops) > 0
	for _, op := range t.ops {
		deletes = deletes && op.IsDelete()
	}
	if deletes && t.kv.before != nil {
		f := t.kv.before
		t.kv.before = nil
		f()
	}
	return t.Txn.Commit()
}

// TestIssue37_WriteCleanupKeepsPageRenamedMeanwhile (issue 37, review
// round 5, the write paths' clean-up): a write too large for one
// transaction puts its pages under a new overlay and, after its header
// lands, deletes the plan's own keys of those pages, which its header no
// longer names. A single-transaction write landing in between (the
// operator's Edit of one reboot) puts that page back under the plan's own
// key: the clean-up must not delete it. Ground truth: a fresh store's Get.
func TestIssue37_WriteCleanupKeepsPageRenamedMeanwhile(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "cleaned"
	n := (maxTxnOps + 4) * PageSize // every page rewritten: too many for one transaction
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, n, "").Servers(), 2, clk.Now())))

	wcli := newClient(t)
	hook := &deleteHookKV{KV: wcli.KV}
	hook.before = func() {
		_, err := plan.Edit(ctx, NewStore(newClient(t), pre), uuid, func(p plan.Plan) (plan.Plan, error) {
			p.Reboots[0].Error = "noted by the operator"
			return p, nil
		})
		require.NoError(t, err)
	}
	wcli.KV = hook
	_, err := plan.Edit(ctx, NewStore(wcli, pre), uuid, func(p plan.Plan) (plan.Plan, error) {
		for i := range p.Reboots {
			p.Reboots[i].Error = fmt.Sprintf("large write %d", i)
		}
		return p, nil
	})
	require.NoError(t, err)
	require.Nil(t, hook.before, "the small write ran before the large write's clean-up")

	p, err := NewStore(newClient(t), pre).Get(ctx, uuid)
	require.NoError(t, err, "the plan after the clean-up: every page its header names is there")
	assert.Equal(t, "noted by the operator", p.Reboots[0].Error)
	assert.Equal(t, "large write 1", p.Reboots[1].Error)
}
