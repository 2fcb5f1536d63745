package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37x_ClockStepBackLosesStop: round 21's onceRecorded takes a
// side-file command recorded before the oldest of a full plan.Commands
// as applied already (errRecordedAlready, nothing written), comparing
// wall-clock times. A clock that was ahead and is stepped back (NTP
// fixing a wrong RTC, a VM restored, or two hosts sharing the store
// over NFS with skewed clocks) makes every new command "older" than
// the plan's last 100 commands: the operator's `plan stop p1` is
// recorded, marked applied with no error, and the operator is told
// "stopped; no new reboot starts", while p1 keeps running and starting
// reboots. Before round 21 the same stop landed (only an exact
// (command, at) match was skipped). Ground truth: p1's state read from
// the store itself, and the executor's next pass starting jobs.
func TestReview37x_ClockStepBackLosesStop(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 3)
	// 100 commands given while the host's clock was one hour ahead (a
	// nightly pause and resume, a script, several operators), ending
	// with a run: p1 runs.
	ahead := time.Now().UTC().Add(time.Hour)
	bs, err := plan.OpenBolt(e.store)
	require.NoError(t, err)
	for i := range plan.MaxCommands {
		name := []string{"stop", "run"}[i%2]
		_, err := plan.Command(e.ctx, bs, "p1", plan.Record(name, ahead.Add(time.Duration(i)*time.Second), cmdFuncs[name]))
		require.NoError(t, err)
	}
	require.NoError(t, bs.Close())
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"))

	// The clock is stepped back to the right time; the operator stops p1.
	var out, errw bytes.Buffer
	e.out, e.errw = &out, &errw
	code := e.command("stop", []string{"p1", "--store", e.store})
	t.Logf("rebootctl plan stop p1: exit %d, %q %q", code, out.String(), errw.String())
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"),
		"p1's state in the store after the operator's stop (told: %q, exit %d): the stop was taken as applied already", out.String(), code)

	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err = ex.Pass(e.ctx, "p1")
	require.NoError(t, err)
	assert.Empty(t, fleet.JobsCreated(), "jobs of p1 started after the operator was told it stopped")
}
