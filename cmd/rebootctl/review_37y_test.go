package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_RestoredSideFileLosesStops (review 37 round 23): the side
// file is restored from an older copy (its ID kept, its Next far below
// the number p1 keeps for that file: plan.Replays). Every stop recorded
// in it from then on gets a number p1 applied already, and onceApplied
// takes it as applied: the operator's stop is lost, told "give the
// command again", and lost again (here twice), up to as many times as
// the file went back (here 9), while the executor keeps starting p1's reboots. The
// regression is plain to see when the record is applied (the plan's
// number for the file is above the file's own Next: no record of this
// file was ever numbered that high), so the record cannot have been
// applied. Ground truth: p1's state read from the store itself.
func TestReview37_RestoredSideFileLosesStops(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	for i := range 10 {
		_, err := recordCommand(e.ctx, e.store, "p1", []string{"stop", "run"}[i%2], time.Now().UTC())
		require.NoError(t, err)
		s, err := e.openStore()
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"))
	// The file restored from its copy taken after the first command.
	require.NoError(t, withCmdFile(e.ctx, e.store, func(c *cmdFile) (bool, error) {
		c.Next, c.Records = 1, c.Records[:1]
		return true, nil
	}))

	// The operator is told the stop did not hold and to give it again:
	// the second time at the latest, it must land.
	var said []string
	for range 2 {
		var out, errw bytes.Buffer
		e.out, e.errw = &out, &errw
		code := e.command("stop", []string{"p1", "--store", e.store})
		said = append(said, fmt.Sprintf("exit %d: %s%s", code, out.String(), errw.String()))
	}
	require.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"),
		"two stops after the restore are both lost: the restored file numbers them 2 and 3, at or below the 10 p1 keeps for that file, so each is taken as applied already; the operator was told: %q", said)
}

// TestReview37_RenamedHostLocksOutOwnFleetFile (review 37 round 23): an
// executor whose machine's hostname changed since its last run (a pod,
// whose hostname is new at every restart, with the fleet state file on
// its volume; a renamed VM) restarts with the very same fleet state
// file while a reboot it started is in flight. sameState compares the
// lease's Host with this machine's hostname, so the file counts as
// "another fleet state file" (inFlightElsewhere), and the executor is
// refused, told to start the executor "on" the old hostname, which no
// longer exists: it never starts again, and the reboot in flight (a
// server drained, or off) is never resumed; the other way out it names,
// cancel, leaves that server to be checked by hand. (The dead process's
// lease no longer lapses at once either: its host is not this one.)
// Ground truth: the fleet state file of both leases is one file, the
// one the job is recorded in.
func TestReview37_RenamedHostLocksOutOwnFleetFile(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 1)
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err := ex.Pass(e.ctx, "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, storeReboot(t, e.store, "p1").Step, "the reboot is in flight")

	state := canonicalPath(e.store + ".fleet")
	require.NoError(t, os.WriteFile(state, []byte("the fleet state file"), 0o600))
	host, _ := os.Hostname()
	// The executor before the rename claimed the store (a minute ago,
	// through claim, as it does) and died.
	old := lease{ID: newLeaseID(), Host: host + "-old", PID: os.Getpid(), State: state, Started: time.Now().Add(-time.Hour).UTC(), Interval: time.Second}
	require.NoError(t, claim(e.ctx, lockedStore{e}, old, time.Now().Add(-time.Minute).UTC()))

	me := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: state, Started: time.Now().UTC(), Interval: time.Second}
	err = claim(e.ctx, lockedStore{e}, me, time.Now().UTC())
	require.NoError(t, err, "an executor restarted with the same fleet state file %s (only the machine's hostname changed) is refused", state)
}

// storeReboot is the first reboot of plan uuid read from the store.
func storeReboot(t *testing.T, store, uuid string) plan.Reboot {
	t.Helper()
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	p, err := bs.Get(t.Context(), uuid)
	require.NoError(t, bs.Close())
	require.NoError(t, err)
	return p.Reboots[0]
}
