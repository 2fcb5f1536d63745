package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/reboot"
)

// noShardFleet is a user's Fleet without the optional ShardFleet (and
// HeadnodeFleet) abilities, whose Observe still names the database
// primary (plan.Observations.ShardPrimary, e.g. for its own logs).
type noShardFleet struct{ plan.Fleet }

// TestReview40_LeaderFleetIsAlwaysAShardFleet: plan.ShardFleet's doc says
// "A Fleet that is not a ShardFleet has no shard: the Executor ignores the
// ShardPrimary it reports and never freezes". The plain plan.Executor does;
// but etcd's Leadership wraps every fleet in leaderFleet, which defines
// FreezeShard and UnfreezeShard whatever the fleet is, so through etcd's
// Executor the ability is always found: the primary's reboot asks for a
// freeze, leaderFleet answers errNoShard every pass, and the plan never
// completes.
func TestReview40_LeaderFleetIsAlwaysAShardFleet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	world := fleetOf(clk, "c", 3, "c-u00000") // reports c-u00000 as the primary
	store := NewStore(newClient(t), pre)
	require.NoError(t, store.Create(ctx, runningPlan(t, "c", world.Servers(), 1, clk.Now())))
	e := &Executor{Candidate: Candidate{Client: newClient(t), Prefix: pre, ID: "x"}, Fleet: noShardFleet{world}, Config: cfg29,
		Now: clk.Now, Interval: time.Minute,
		After: func(d time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			ch <- clk.Advance(d)
			return ch
		}}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := store.Get(context.Background(), "c")
		require.NoError(t, err)
		if p.State == plan.StateComplete {
			break
		}
		if p.State == plan.StateFailed || time.Now().After(deadline) {
			var rs []string
			for _, r := range p.Reboots {
				rs = append(rs, fmt.Sprintf("%s:%s:%s", r.ServerHostname, r.Step, r.Error))
			}
			t.Fatalf("a fleet that is not a ShardFleet: the plan did not complete through etcd's Executor (state %v): %v", p.State, rs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReview40_GuardHoldsAfterResign: Leadership.Resign "gives the
// leadership up (the next candidate takes over at once)", but the
// leadership's Guard keeps answering Hold for up to about half the lease
// TTL after it (Hold confirms with etcd only when less than 45 % of the TTL
// is left), so a process that resigns while its Runner still finishes
// passes (a graceful handover) writes and powers hosts while the next
// leader's Guard also holds: two fenced actors at once (assumption A4).
func TestReview40_GuardHoldsAfterResign(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pre := prefix(t)
	l1, _ := lead(t, pre, "one", 30)
	g1 := l1.Guard()
	hctx, hcancel, err := g1.Hold(ctx) // confirms: the lease is fresh
	require.NoError(t, err)
	hcancel()
	_ = hctx
	require.NoError(t, l1.Resign(ctx))
	l2, _ := lead(t, pre, "two", 30) // takes over at once
	_, c2, err := l2.Guard().Hold(ctx)
	require.NoError(t, err, "the new leader's guard")
	defer c2()
	_, c1, err := g1.Hold(ctx)
	if err == nil {
		c1()
		t.Fatal("the resigned leader's Guard still holds while the next leader's does (both may write and power hosts)")
	}
	require.ErrorIs(t, err, reboot.ErrNotLeader)
}
