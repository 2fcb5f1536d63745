package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// TestLeaseGuardEndsWhenLeaseTakenOutside: a leader's LeaseGuard (a 15 s
// lease, just renewed) whose Lease is deleted by hand (`kubectl delete
// lease`) or whose holderIdentity is edited, while another candidate
// takes the lease at once (client-go's candidates acquire a missing or
// unheld Lease without waiting), stops within 2 s: Hold refuses, the
// context it returned before has ended, and a power call through Wrap is
// refused. Without the Lease's watch the guard answered from its last
// renewal for up to the lease's duration minus the margin (10 s here),
// next to the new leader. Ground truth: the Lease read from the API
// server names the other candidate.
func TestLeaseGuardEndsWhenLeaseTakenOutside(t *testing.T) {
	needAPIServer(t)
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	const lease = 15 * time.Second
	for name, take := range map[string]func(ctx context.Context, t *testing.T, key client.ObjectKey, b *LeaseGuard, ler resourcelock.LeaderElectionRecord){
		"deleted": func(ctx context.Context, t *testing.T, key client.ObjectKey, b *LeaseGuard, ler resourcelock.LeaderElectionRecord) {
			require.NoError(t, direct.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}))
			require.NoError(t, b.Create(ctx, ler), "the other candidate creates the Lease again")
		},
		"holder edited": func(ctx context.Context, t *testing.T, key client.ObjectKey, b *LeaseGuard, ler resourcelock.LeaderElectionRecord) {
			var l coordinationv1.Lease
			require.NoError(t, direct.Get(ctx, key, &l))
			l.Spec.HolderIdentity = ptr.To("")
			require.NoError(t, direct.Update(ctx, &l), "an operator frees the Lease")
			_, _, err := b.Get(ctx)
			require.NoError(t, err)
			require.NoError(t, b.Update(ctx, ler), "the other candidate takes it")
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			lname := "lease-watch-" + map[string]string{"deleted": "del", "holder edited": "edit"}[name]
			key := client.ObjectKey{Namespace: ns, Name: lname}
			a, err := NewLeaseGuard(cfg, ns, lname, "a", lease, lease/2)
			require.NoError(t, err)
			b, err := NewLeaseGuard(cfg, ns, lname, "b", lease, lease/2)
			require.NoError(t, err)
			record := func(id string) resourcelock.LeaderElectionRecord {
				now := metav1.Now()
				return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: int(lease / time.Second), AcquireTime: now, RenewTime: now}
			}
			require.NoError(t, a.Create(ctx, record("a")))
			hctx, hcancel, err := a.Hold(ctx)
			require.NoError(t, err)
			defer hcancel()
			pc := a.Wrap(fake.NewPower(time.Now, fake.PowerConfig{}))
			time.Sleep(time.Second)
			require.NoError(t, hctx.Err(), "nothing happened to the Lease: the held context lives")
			require.NoError(t, pc.Off(ctx, power.ModeHard), "nothing happened to the Lease: a power call goes through")

			take(ctx, t, key, b, record("b"))
			var l coordinationv1.Lease
			require.NoError(t, direct.Get(ctx, key, &l))
			require.Equal(t, "b", ptr.Deref(l.Spec.HolderIdentity, ""), "the other candidate holds the Lease")

			deadline := time.Now().Add(2 * time.Second)
			for {
				_, c, err := a.Hold(ctx)
				if err == nil {
					c()
				}
				callErr := pc.On(ctx)
				if err != nil && hctx.Err() != nil && callErr != nil {
					require.ErrorIs(t, callErr, ErrNotLeader)
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("2 s after the Lease was %s and taken by another candidate, the old leader's guard still answers (Hold error %v, held context %v, power call %v)", name, err, hctx.Err(), callErr)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
