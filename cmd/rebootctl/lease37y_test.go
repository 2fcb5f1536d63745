package main

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestLease_StateIDNamesFleetFile (review 37 round 23): with a reboot in
// flight, the lease's StateID (the fleet state file's own ID) decides
// whether a new executor has the same fleet state file, not its
// machine's hostname nor the path: the same ID on a renamed host is let
// in; another ID at the same path on the same host (the file made
// again: its jobs are gone) is refused, naming both IDs; a lease of an
// older rebootctl (no ID) falls back to hostname and path, and the
// refusal says what to do if this machine is that one renamed. Ground
// truth: the reboot's step read from the store.
func TestLease_StateIDNamesFleetFile(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 1)
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err := ex.Pass(e.ctx, "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, storeReboot(t, e.store, "p1").Step, "the reboot is in flight")
	state := canonicalPath(e.store + ".fleet")
	host, _ := os.Hostname()
	claimAs := func(l lease, at time.Time) error { return claim(e.ctx, lockedStore{e}, l, at) }
	mk := func(h, id string) lease {
		return lease{ID: newLeaseID(), Host: h, PID: os.Getpid(), State: state, StateID: id, Started: time.Now().UTC(), Interval: time.Second}
	}
	// Each claim a minute after the one before: that one has lapsed.
	at := time.Now().Add(-10 * time.Minute).UTC()
	next := func() time.Time { at = at.Add(time.Minute); return at }

	require.NoError(t, claimAs(mk(host+"-old", "aaaa"), next()))
	require.NoError(t, claimAs(mk(host, "aaaa"), next()), "the same fleet state file (its ID) on a renamed host")

	require.NoError(t, claimAs(mk(host, "aaaa"), next()))
	err = claimAs(mk(host, "bbbb"), next())
	require.ErrorIs(t, err, errOtherState, "a fleet state file made again at the same path knows none of the jobs in flight")
	assert.Contains(t, err.Error(), "fleet state file ID aaaa")
	assert.Contains(t, err.Error(), "has ID bbbb")

	// A lease as an older rebootctl wrote it (no state_id).
	older := func(h string) {
		raw, err := json.Marshal(mk(h, ""))
		require.NoError(t, err)
		require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) error { return st.PutMeta(e.ctx, metaLease, raw) }))
	}
	older(host + "-old")
	e2 := claimAs(mk(host, "cccc"), next())
	require.ErrorIs(t, e2, errOtherState, "a lease of an older rebootctl: another host, so another file")
	assert.Contains(t, e2.Error(), "if this machine is "+host+"-old renamed")
	older(host)
	require.NoError(t, claimAs(mk(host, "cccc"), next()), "a lease of an older rebootctl: same host and path, same file")
}
