package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// TestLease_GenerationTellsStaleCopy (review 37 round 24): a fleet state
// file with the lease's ID is the lease's file only at the generation the
// lease records, or the one before it (its executor died between
// advancing the file and claiming); a copy at an older generation is
// refused (errStaleState), naming the file to use; a lease that records
// no generation (an older rebootctl's) accepts the file. Ground truth:
// the lease read back from the store.
func TestLease_GenerationTellsStaleCopy(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	host, _ := os.Hostname()
	state := canonicalPath(e.store + ".fleet")
	mk := func(gen, prev string) lease {
		return lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: state, StateID: "aaaa", Gen: gen, prevGen: prev,
			Started: time.Now().UTC(), Interval: time.Second}
	}
	at := time.Now().Add(-10 * time.Minute).UTC()
	next := func() time.Time { at = at.Add(time.Minute); return at }
	claimAs := func(l lease) error { return claim(e.ctx, lockedStore{e}, l, next()) }

	require.NoError(t, claimAs(mk("", "")), "no lease yet")
	require.NoError(t, claimAs(mk("g1", "")), "a lease with no generation accepts the file")
	require.NoError(t, claimAs(mk("g2", "g1")), "the file advanced once more, its executor died before claiming")
	require.NoError(t, claimAs(mk("g2", "g1")), "the file at the lease's generation")
	err := claimAs(mk("g1", "g0"))
	require.ErrorIs(t, err, errStaleState, "a copy taken before the last pass")
	assert.True(t, leaseLost(err))
	assert.Contains(t, err.Error(), "fleet state file")
	assert.Contains(t, err.Error(), "recorded generation g2")
	assert.Contains(t, err.Error(), state+" on "+host)
	err = claimAs(mk("", ""))
	require.ErrorIs(t, err, errStaleState, "a copy taken before the file had a generation")

	var cur lease
	require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(e.ctx, metaLease)
		require.NoError(t, err)
		return json.Unmarshal(raw, &cur)
	}))
	assert.Equal(t, "g2", cur.Gen, "the refused claims wrote nothing")
}

// TestLease_OwedLedgerRefusesOtherState (review 37 round 24): the last
// executor's ledger (what its fleet state file owes: a power-on after a
// job that gave up, an undrain) refuses an executor with another fleet
// state file although no plan has a reboot in its job step, naming each
// server, its plan, what is owed, and the way out; an abandon of that
// server in that plan gives it up (the operator took it over); an
// abandon in another plan does not. Ground truth: the plans' reboots
// read from the store (none in flight).
func TestLease_OwedLedgerRefusesOtherState(t *testing.T) {
	e, _, _ := review37sWorld(t, 2)
	host, _ := os.Hostname()
	p := storeGet(t, e, "p1")
	for _, r := range p.Reboots {
		require.NotEqual(t, plan.StepJob, r.Step)
	}
	owner := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/first.fleet", StateID: "aaaa", Started: time.Now().UTC(), Interval: time.Second}
	owed := []inventory.Owed{
		{Server: p.Reboots[0].ServerUUID, Hostname: p.Reboots[0].ServerHostname, Plan: "p1", Job: "j0", What: inventory.OwedPower},
		{Server: p.Reboots[1].ServerUUID, Hostname: p.Reboots[1].ServerHostname, Plan: "p1", Job: "j1", What: inventory.OwedJob},
	}
	at := time.Now().Add(-10 * time.Minute).UTC()
	_, err := claimCore(e.ctx, lockedStore{e}, owner, lease{}, owed, at)
	require.NoError(t, err)

	other := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/other.fleet", StateID: "bbbb", Started: time.Now().UTC(), Interval: time.Second}
	err = claim(e.ctx, lockedStore{e}, other, time.Now().UTC())
	require.ErrorIs(t, err, errOtherState)
	for _, want := range []string{
		p.Reboots[0].ServerHostname + " (plan p1): its power cycle has not settled",
		p.Reboots[1].ServerHostname + " (plan p1): its reboot job has not ended",
		"--state /var/lib/first.fleet", "rebootctl plan abandon PLAN SERVER",
	} {
		assert.Contains(t, err.Error(), want)
	}

	abandon := func(server, planUUID string) {
		all := map[string]abandonRecord{}
		require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) error {
			raw, err := st.GetMeta(e.ctx, metaAbandoned)
			require.NoError(t, err)
			all = readAbandoned(raw)
			all[server] = abandonRecord{Plan: planUUID, At: time.Now().UTC()}
			out, _ := json.Marshal(all)
			return st.PutMeta(e.ctx, metaAbandoned, out)
		}))
	}
	abandon(p.Reboots[0].ServerUUID, "p1")
	abandon(p.Reboots[1].ServerUUID, "p9")
	err = claim(e.ctx, lockedStore{e}, other, time.Now().UTC())
	require.ErrorIs(t, err, errOtherState, "an abandon in another plan gives nothing up")
	assert.NotContains(t, err.Error(), p.Reboots[0].ServerHostname+" (plan p1)", "abandoned in its plan: given up")
	abandon(p.Reboots[1].ServerUUID, "p1")
	require.NoError(t, claim(e.ctx, lockedStore{e}, other, time.Now().UTC()), "every owed server abandoned in its plan")
}

// TestLease_PassStopsWhenLeaseTakenOver (review 37 round 24): another
// executor takes the store's lease over during a pass (this one was
// paused past its lease): the pass's next renewal fails, its context
// ends at once (nothing more is started), leasedPass returns the
// renewal's error (the executor stops), and a plan write of this
// executor is refused from then on (lockedStore.fence). Ground truth:
// the lease and the plan read from the store.
func TestLease_PassStopsWhenLeaseTakenOver(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	host, _ := os.Hostname()
	me := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: canonicalPath(e.store + ".fleet"), StateID: "aaaa", Started: time.Now().UTC(), Interval: 50 * time.Millisecond}
	h := &leaseHolder{store: lockedStore{e}, me: me}
	require.NoError(t, h.claim(e.ctx, time.Now().UTC()))
	e.leaseID = me.ID
	p := storeGet(t, e, "p1")
	require.NoError(t, lockedStore{e}.Put(e.ctx, p), "the lease holder writes")

	// Another executor (its own fleet state file's lease) took the store over.
	other := lease{ID: newLeaseID(), Host: host + "-b", PID: 1, State: "/b.fleet", StateID: "bbbb", Started: time.Now().UTC(), Interval: time.Hour, At: time.Now().UTC()}
	raw, _ := json.Marshal(other)
	require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) error { return st.PutMeta(e.ctx, metaLease, raw) }))

	passEnded := make(chan error, 1)
	err := e.leasedPass(h, time.Now(), me.Interval, executorLogger(os.Stderr, false, false), func() {}, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			passEnded <- context.Cause(ctx)
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			passEnded <- nil
			return nil
		}
	})
	require.ErrorIs(t, err, errOtherExecutor)
	assert.True(t, leaseLost(err), "the executor stops")
	assert.ErrorIs(t, <-passEnded, errOtherExecutor, "the pass's context ended with the renewal's error")

	err = lockedStore{e}.Put(e.ctx, p)
	require.ErrorIs(t, err, errOtherExecutor, "a plan write without the lease")
	assert.True(t, errors.Is(lockedStore{e}.PutHead(e.ctx, plan.FullView(p)), errOtherExecutor))
}

// storeGet reads plan uuid through the executor's store.
func storeGet(t *testing.T, e *env, uuid string) plan.Plan {
	t.Helper()
	p, err := lockedStore{e}.Get(e.ctx, uuid)
	require.NoError(t, err)
	return p
}
