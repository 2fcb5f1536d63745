package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// stepClock makes claims wait on a clock of the test's: each wait moves
// it by the wait and calls between (nil: nothing), as another executor
// would act meanwhile. It returns the waits' total.
func stepClock(t *testing.T, between func(waited time.Duration)) *time.Duration {
	t.Helper()
	prev := leaseTime
	var clock time.Duration
	leaseTime = leaseClock{
		now: func() time.Duration { return clock },
		sleep: func(ctx context.Context, d time.Duration) error {
			clock += d
			if between != nil {
				between(clock)
			}
			return ctx.Err()
		},
		poll: 100 * time.Millisecond, maxPoll: time.Second,
	}
	t.Cleanup(func() { leaseTime = prev })
	return &clock
}

// storedLease reads the store's lease.
func storedLease(t *testing.T, e *env) lease {
	t.Helper()
	var cur lease
	require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(e.ctx, metaLease)
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &cur)
	}))
	return cur
}

// TestClaimWait_LapseMeasuredHere (issue 37 round 25): another machine's
// lease is judged by this process's clock only. Its At, whatever it says
// (an hour ago, an hour ahead), takes nothing over by itself: the claim
// waits, telling the operator on stderr whose lease and how long, and
// takes the store over only once the record stayed unchanged for three
// intervals and ten seconds of this clock; a renewal seen while it waits
// refuses it at once. A lease given up (release) is taken at once, with
// no wait. Ground truth: the lease read back from the store, and the
// test's clock.
func TestClaimWait_LapseMeasuredHere(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	var errw bytes.Buffer
	e.errw = &errw
	host, _ := os.Hostname()
	mk := func(h string) lease {
		return lease{ID: newLeaseID(), Host: h, PID: 4242, State: "/shared/plans.db.fleet", StateID: "aaaa", Started: time.Now().UTC(), Interval: 5 * time.Second}
	}
	const ttl = 25 * time.Second
	for _, at := range []time.Duration{-time.Hour, 0, time.Hour} {
		other := mk("machine-a")
		stepClock(t, nil)
		require.NoError(t, claim(e.ctx, lockedStore{e}, other, time.Now().Add(at).UTC()))
		errw.Reset()
		me := mk(host)
		clock := stepClock(t, nil)
		require.NoError(t, claim(e.ctx, lockedStore{e}, me, time.Now().UTC()), "a lease unchanged for its ttl (At %s off) is taken over", at)
		assert.Equal(t, ttl, *clock, "taken over once unchanged for exactly its ttl, as this process measured it")
		assert.Equal(t, me.ID, storedLease(t, e).ID)
		assert.Equal(t, 1, bytes.Count(errw.Bytes(), []byte("\n")), errw.String())
		assert.Contains(t, errw.String(), "on machine-a, pid 4242")
		assert.Contains(t, errw.String(), "waiting up to 25s")
	}

	// A renewal while the claim waits: refused at once.
	live := mk("machine-a")
	require.NoError(t, claim(e.ctx, lockedStore{e}, live, time.Now().UTC()))
	other := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}}
	clock := stepClock(t, func(waited time.Duration) {
		if waited >= 3*time.Second && waited < 4*time.Second {
			require.NoError(t, claim(e.ctx, lockedStore{other}, live, time.Now().Add(-time.Hour).UTC()), "its renewal, by a clock an hour behind")
		}
	})
	err := claim(e.ctx, lockedStore{e}, mk(host), time.Now().UTC())
	require.ErrorIs(t, err, errOtherExecutor)
	assert.Less(t, *clock, 5*time.Second, "refused as soon as the renewal was seen")
	assert.Equal(t, live.ID, storedLease(t, e).ID)

	// Given up when it stopped: taken at once.
	release(e.store, nil, live, nil)
	errw.Reset()
	clock = stepClock(t, nil)
	me := mk(host)
	require.NoError(t, claim(e.ctx, lockedStore{e}, me, time.Now().UTC()))
	assert.Zero(t, *clock, "no wait for a lease given up")
	assert.Empty(t, errw.String())
	assert.Equal(t, me.ID, storedLease(t, e).ID)

	// A claim ends with its context while it waits.
	ctx, cancel := context.WithCancel(e.ctx)
	stepClock(t, func(time.Duration) { cancel() })
	err = claim(ctx, lockedStore{e}, mk(host), time.Now().UTC())
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, me.ID, storedLease(t, e).ID)
}

// TestClaimWait_RenewerNeverTakesBack (issue 37 round 25): a holder's
// renewal that finds another executor's lease is refused at once, however
// old that lease's At looks, and waits for nothing: it lost the store.
func TestClaimWait_RenewerNeverTakesBack(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	host, _ := os.Hostname()
	me := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: canonicalPath(e.store + ".fleet"), StateID: "aaaa", Started: time.Now().UTC(), Interval: time.Second}
	h := &leaseHolder{store: lockedStore{e}, me: me}
	require.NoError(t, h.claim(e.ctx, time.Now().UTC()))
	require.NoError(t, h.claim(e.ctx, time.Now().UTC()), "renewed")
	seq := storedLease(t, e).Seq
	assert.Equal(t, uint64(2), seq, "each write counts")

	other := lease{ID: newLeaseID(), Host: "machine-b", PID: 7, State: "/b.fleet", StateID: "aaaa", Started: time.Now().UTC(), Interval: time.Second}
	clock := stepClock(t, nil)
	require.NoError(t, claim(e.ctx, lockedStore{e}, other, time.Now().Add(-time.Hour).UTC()), "machine-b takes the store over once me's lease is unchanged for its ttl")
	assert.Equal(t, 13*time.Second, *clock)

	*clock = 0
	err := h.claim(e.ctx, time.Now().UTC())
	require.ErrorIs(t, err, errOtherExecutor, "a lease an hour old by this clock is still another's")
	assert.Zero(t, *clock, "a renewal waits for nothing")
	assert.Equal(t, other.ID, storedLease(t, e).ID)
}
