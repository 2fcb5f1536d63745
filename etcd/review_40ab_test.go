package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// review40abTakeover makes "one" the leader (TTL 30 s), holds its Guard,
// lets take end its leadership from the outside, makes "two" lead, and
// checks that within 2 s one's Guard refuses and the context it held
// before has ended: two fenced leaders at once otherwise.
func review40abTakeover(t *testing.T, take func(ctx context.Context, l *Leadership)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pre := prefix(t)
	l1, _ := lead(t, pre, "one", 30)
	hctx, hcancel, err := l1.Guard().Hold(ctx)
	require.NoError(t, err)
	defer hcancel()

	take(ctx, l1)
	l2, _ := lead(t, pre, "two", 30) // leads at once: one's key is gone
	_, c2, err := l2.Guard().Hold(ctx)
	require.NoError(t, err, "the new leader's guard")
	defer c2()

	deadline := time.After(2 * time.Second)
	for {
		_, c1, err := l1.Guard().Hold(ctx)
		if err == nil {
			c1()
		}
		if err != nil && hctx.Err() != nil {
			return
		}
		select {
		case <-deadline:
			dl, _ := hctx.Deadline()
			t.Fatalf("2 s after the next leader took over (its Guard holds), the old leader's Guard still answers (Hold error %v) and the context it held before is live (%v; its deadline is in %v): both act on hosts", err, hctx.Err(), time.Until(dl).Round(time.Second))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestReview40ab_GuardHoldsAfterLeaseRevoked: Leadership.Guard's doc says
// its contexts "end too as soon as the session ends (its lease revoked by
// Close, or expired)". A lease revoked by someone else (an operator
// forcing a failover with `etcdctl lease revoke`, the usual way to move an
// etcd election) ends the session too, and the next candidate leads at
// once; but the old leader learns it only at its session's next
// keep-alive (a third of the TTL later), and Hold does not renew while
// more than 45 % of the TTL is left: meanwhile its Guard answers and its
// contexts live, next to the new leader's.
func TestReview40ab_GuardHoldsAfterLeaseRevoked(t *testing.T) {
	cli := newClient(t)
	review40abTakeover(t, func(ctx context.Context, l *Leadership) {
		_, err := cli.Revoke(ctx, l.session.Lease())
		require.NoError(t, err)
	})
}

// TestReview40ab_GuardHoldsAfterElectionKeyDeleted: the same with the
// election key deleted by hand (`etcdctl del` of the leader key): the
// next candidate leads at once, and the old leader's Guard goes on
// answering from its cached lease for up to 45 % of the TTL (it checks
// the key only when it renews), its held contexts up to 90 %.
func TestReview40ab_GuardHoldsAfterElectionKeyDeleted(t *testing.T) {
	cli := newClient(t)
	review40abTakeover(t, func(ctx context.Context, l *Leadership) {
		_, err := cli.Delete(ctx, l.Key)
		require.NoError(t, err)
	})
}
