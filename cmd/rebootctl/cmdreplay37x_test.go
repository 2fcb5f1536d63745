package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestSideFiles_ReplayJudgedByNumbers: whether a side-file record was
// applied already is judged by its file's ID and its number (the plan
// keeps the highest number applied per file: plan.Replays), never by its
// time. A record numbered at or below the plan's number of its file is
// skipped whatever its time (a later one ran, or it ran itself); one
// numbered above is applied whatever its time (a clock stepped back);
// a file the plan keeps no number of is applied unless the plan's
// Commands hold the record exactly. Before, a record older than a full
// Commands' oldest was skipped: a stop given after a clock step back was
// lost.
func TestSideFiles_ReplayJudgedByNumbers(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p := plan.Plan{State: plan.StateRunning}
	for i := range plan.MaxCommands {
		p.Commands = append(p.Commands, plan.Mark{At: now.Add(time.Hour + time.Duration(i)*time.Second), Command: []string{"stop", "run"}[i%2]})
	}
	stop := func(seq int64, at time.Time) cmdRecord {
		return cmdRecord{Seq: seq, Plan: "p1", Command: "stop", At: at}
	}

	// A new file: applied, although its time is before every command's.
	q, err := onceApplied("f1", stop(1, now), plan.Stop)(p)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, q.State)
	seq, ok := q.Replayed("f1")
	assert.True(t, ok)
	assert.Equal(t, int64(1), seq)
	assert.Len(t, q.Commands, plan.MaxCommands)

	// Replayed (its mark in the file lost): skipped, nothing written.
	_, err = onceApplied("f1", stop(1, now), plan.Stop)(q)
	require.ErrorIs(t, err, errRecordedAlready)

	// A later run of the same file, then the old stop again (and an
	// older run): skipped, the run stays in effect whatever the times.
	r, err := onceApplied("f1", cmdRecord{Seq: 7, Plan: "p1", Command: "run", At: now.Add(-time.Hour)}, plan.Run)(q)
	require.NoError(t, err)
	assert.Equal(t, plan.StateRunning, r.State)
	for _, old := range []cmdRecord{stop(1, now.Add(48*time.Hour)), {Seq: 6, Plan: "p1", Command: "stop", At: now.Add(-2 * time.Hour)}} {
		_, err = onceApplied("f1", old, plan.Stop)(r)
		require.ErrorIs(t, err, errRecordedAlready, "record %d of f1 after record 7 applied", old.Seq)
	}
	// Record 8 at any time: applied.
	s, err := onceApplied("f1", stop(8, now.Add(-72*time.Hour)), plan.Stop)(r)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, s.State)

	// Another file (f1 removed and made again): numbers from 1 again,
	// applied; f1's number kept.
	u, err := onceApplied("f2", cmdRecord{Seq: 1, Plan: "p1", Command: "run", At: now}, plan.Run)(s)
	require.NoError(t, err)
	assert.Equal(t, plan.StateRunning, u.State)
	seq, _ = u.Replayed("f1")
	assert.Equal(t, int64(8), seq)

	// A file the plan keeps no number of, whose record the Commands hold
	// (applied by a rebootctl that kept no numbers): skipped.
	last := u.Commands[len(u.Commands)-1]
	_, err = onceApplied("f3", cmdRecord{Seq: 1, Plan: "p1", Command: last.Command, At: last.At}, cmdFuncs[last.Command])(u)
	require.ErrorIs(t, err, errRecordedAlready)

	// The plan keeps the last plan.MaxReplays files.
	for i := range plan.MaxReplays + 3 {
		u, err = onceApplied(string(rune('a'+i)), cmdRecord{Seq: 1, Plan: "p1", Command: "run", At: now.Add(-time.Duration(i+1) * time.Minute)}, func(p plan.Plan) (plan.Plan, error) { return p, nil })(u)
		require.NoError(t, err)
	}
	assert.Len(t, u.Replays, plan.MaxReplays)
	_, ok = u.Replayed("f1")
	assert.False(t, ok, "the oldest file's number is dropped")
}

// TestCommand_StopNotInEffectIsNotStopped: what plan stop prints comes
// from the plan's state read back from the store: a stop taken as
// applied already (here: a side file restored from an older copy, so
// its number is one the plan applied before) leaves p1 running, and the
// operator is told so (exit error, the state, the fix), never
// "stopped". Before, commandDone printed "stopped" whatever the state.
func TestCommand_StopNotInEffectIsNotStopped(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	for _, name := range []string{"stop", "run"} {
		_, err := recordCommand(e.ctx, e.store, "p1", name, time.Now().UTC())
		require.NoError(t, err)
		s, err := e.openStore()
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"))
	// The file restored from its copy taken after the stop only.
	require.NoError(t, withCmdFile(e.ctx, e.store, func(c *cmdFile) (bool, error) {
		c.Next, c.Records = 1, c.Records[:1]
		return true, nil
	}))

	var out, errw bytes.Buffer
	e.out, e.errw = &out, &errw
	code := e.command("stop", []string{"p1", "--store", e.store})
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"), "the restored file's number 2 was applied before (the run)")
	assert.Equal(t, exitError, code)
	assert.NotContains(t, out.String(), "stopped")
	assert.Contains(t, errw.String(), "the store now holds the plan running")
	assert.Contains(t, errw.String(), "rebootctl plan stop p1")

	// commandDone alone: the state read back decides the words.
	v := plan.View{Plan: plan.Plan{UUID: "p1", State: plan.StateRunning}}
	assert.NotContains(t, commandDone("stop", v), "stopped")
	assert.NotContains(t, commandDone("cancel", v), "canceled")
	require.Error(t, notInEffect("stop", v))
	v.State = plan.StateCanceled
	assert.NoError(t, notInEffect("stop", v), "a plan canceled since starts nothing")
	assert.Contains(t, commandDone("stop", v), "canceled; no new reboot starts")
}
