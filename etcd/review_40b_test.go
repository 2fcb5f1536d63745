package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReview40b_GuardContextOutlivesRevokedLease: the Executor ends a
// leadership by closing its session ("ends the lease: the next candidate
// takes over at once"), which revokes the lease. A context that the
// leadership's Guard returned before stays live until its deadline (up to
// 90 % of the TTL after the last renewal), although the next candidate
// already leads and its own Guard holds: two fenced actors at once. Hold
// ends its contexts with Resign only, not with the session.
func TestReview40b_GuardContextOutlivesRevokedLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pre := prefix(t)
	cli := newClient(t)
	c1 := Candidate{Client: cli, Prefix: pre, ID: "one", TTL: 30}
	s1, err := c1.NewSession(ctx)
	require.NoError(t, err)
	l1, err := c1.Campaign(ctx, s1)
	require.NoError(t, err)
	hctx, hcancel, err := l1.Guard().Hold(ctx)
	require.NoError(t, err)
	defer hcancel()

	require.NoError(t, s1.Close())   // revokes the lease
	l2, _ := lead(t, pre, "two", 30) // takes over at once
	_, c2, err := l2.Guard().Hold(ctx)
	require.NoError(t, err, "the new leader's guard")
	defer c2()

	select {
	case <-hctx.Done():
	case <-time.After(2 * time.Second):
		dl, _ := hctx.Deadline()
		t.Fatalf("the old leader's Hold context is still live 2 s after its lease was revoked and the next leader holds (it ends only at %v, in %v)", dl.Format(time.RFC3339), time.Until(dl).Round(time.Second))
	}
}
