package etcd

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestMaintainSweepsOrphansAfterDeleteError (issue 37, review round 8):
// SweepOrphans moves the sweep key in its read and returns the revision
// to pass next even when the delete of a group fails; Maintain kept the
// previous revision on any error, so its next call found the sweep key
// moved, only marked, and the orphan stayed one more period (for good
// while one group keeps failing). Ground truth: the page key read
// directly after the next Maintain.
func TestMaintainSweepsOrphansAfterDeleteError(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	ghost := pre + "pages/ghost/n1/00000000"
	var failing atomic.Bool
	hooked := hookClient(t, func(req any) error {
		r, ok := req.(*pb.TxnRequest)
		if !ok || !failing.Load() {
			return nil
		}
		for _, op := range r.Success {
			if d := op.GetRequestDeleteRange(); d != nil && strings.HasPrefix(string(d.Key), pre+"pages/ghost/") {
				return errors.New("injected: delete lost")
			}
		}
		return nil
	}, nil)
	c := Candidate{Client: hooked, Prefix: pre, ID: "x", TTL: 60}
	sess, err := c.NewSession(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := c.Campaign(cctx, sess)
	require.NoError(t, err)

	cli := newClient(t)
	_, err = cli.Put(ctx, ghost, "[]")
	require.NoError(t, err)
	now := time.Time{}
	require.NoError(t, l.Maintain(ctx, now, time.Hour), "first: marks only")
	failing.Store(true)
	require.Error(t, l.Maintain(ctx, now, time.Hour), "second: the delete fails")
	failing.Store(false)
	require.NoError(t, l.Maintain(ctx, now, time.Hour), "third")
	resp, err := cli.Get(ctx, ghost)
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "ground truth: the orphan page is deleted by the Maintain after the failed one")
}
