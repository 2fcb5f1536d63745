package plan_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// Issue 13 A: an operator's cancel between the executor's read and write is
// never overwritten (the old executor saved the whole plan back with a
// plain Put: "final state complete, 4 reboot jobs created").
func TestRegressionCancelNotOverwritten(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(4)
	w := newWorld(t, fleetServers(0, 4, time.Minute), "", o)
	once := false
	w.store.SetInterloper(func(string) {
		if !once {
			once = true
			_, err := plan.Command(w.ctx, w.store, w.uuid, plan.Cancel)
			require.NoError(t, err)
		}
	})
	_, err := w.exec.Pass(w.ctx, w.uuid)
	require.ErrorIs(t, err, plan.ErrConflict, "the executor's write must lose to the cancel")
	final := w.runUntilDone(10*time.Second, 100)
	assert.Equal(t, plan.StateCanceled, final.State)
	assert.Empty(t, w.fleet.JobsCreated(), "no reboot job after a confirmed cancel")
}

// Issue 13 C: the limit holds for core servers too, a server whose reboot
// failed still counts while it is down, a server missing from the
// observations counts, and when the plan waits for servers it does not
// control it says so.
func TestRegressionOfflineHasOneMeaning(t *testing.T) {
	t.Run("core start with plan servers down", func(t *testing.T) {
		fs := fleetServers(2, 3, time.Minute)
		fs[3].DownNow, fs[4].DownNow = true, true
		o := opts()
		o.Concurrency = plan.Count(2)
		w := newWorld(t, fs, "", o)
		p := w.pass()
		assert.Empty(t, w.fleet.JobsCreated(), "a core server started with 2 servers down, concurrency 2")
		assert.Contains(t, p.Waiting, "2 server(s) offline")
		assert.Contains(t, plan.Summarize(p, w.clk.Now()).Line(10), "waiting: 2 server(s) offline")
	})
	t.Run("missing from the observations", func(t *testing.T) {
		o := opts()
		o.Concurrency = plan.Count(1)
		w := newWorld(t, fleetServers(0, 3, time.Minute), "", o)
		w.fleet.Hide("u002", true)
		w.pass()
		assert.Empty(t, w.fleet.JobsCreated(), "a server nobody observed counted as up")
	})
	t.Run("failed and still down", func(t *testing.T) {
		fs := fleetServers(0, 3, time.Minute)
		fs[0].NeverUp = true
		o := opts()
		o.Concurrency = plan.Count(1)
		o.FailureBudget = plan.Count(3)
		w := newWorld(t, fs, "", o)
		w.exec.Config = plan.Config{ServicesTimeout: 5 * time.Minute}
		for i := 0; i < 200; i++ {
			w.pass()
			w.clk.Advance(30 * time.Second)
		}
		for _, st := range w.fleet.Starts() {
			assert.Less(t, len(st.Offline), 1, "job for %s started with %v offline", st.Server, st.Offline)
		}
	})
	t.Run("timed-out job is cancelled and counted until it ended", func(t *testing.T) {
		fs := fleetServers(0, 3, time.Minute)
		fs[0].Drain = time.Hour // slower than the drain timeout
		o := opts()
		o.Concurrency = plan.Count(1)
		o.FailureBudget = plan.Count(3)
		w := newWorld(t, fs, "", o)
		w.exec.Config = plan.Config{DrainTimeout: 5 * time.Minute}
		var p plan.Plan
		for i := 0; i < 40; i++ {
			p = w.pass()
			w.clk.Advance(30 * time.Second)
		}
		assert.Equal(t, plan.StepFailed, p.Reboots[0].Step)
		assert.Equal(t, 0, w.fleet.Reboots()["u000"], "cancelled before it rebooted the server")
		for _, st := range w.fleet.Starts() {
			assert.Empty(t, st.Offline, "job for %s started while %v was offline", st.Server, st.Offline)
		}
	})
}

// Issue 13 C: a job the fleet garbage-collected is never re-created for a
// server whose job was seen.
func TestRegressionCollectedJobNotRecreated(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(1)
	fs := fleetServers(0, 2, time.Minute)
	w := newWorld(t, fs, "", o)
	w.pass()
	w.clk.Advance(time.Second)
	w.pass() // the job is seen
	w.clk.Advance(time.Hour)
	w.fleet.CollectJobs(0) // finished and collected before the executor looked
	final := w.runUntilDone(10*time.Second, 500)
	assert.Equal(t, plan.StateComplete, final.State)
	for s, n := range w.fleet.JobsCreated() {
		assert.Equal(t, 1, n, "server %s", s)
	}
}

// Issue 13 D: validation.
func TestRegressionValidation(t *testing.T) {
	ctx := context.Background()
	st := fake.NewPlanStore()
	o := opts()
	p, _, err := plan.Create(servers(1, 2), o)
	require.NoError(t, err)
	require.NoError(t, st.Create(ctx, p))
	assert.ErrorIs(t, st.Create(ctx, p), plan.ErrExists, "a reused plan UUID")

	// The store checks other plans even when the caller forgets Existing.
	o2 := opts()
	o2.UUID = "p2"
	q, _, err := plan.Create(servers(1, 2), o2)
	require.NoError(t, err)
	assert.ErrorIs(t, st.Create(ctx, q), plan.ErrServerInPlan)

	for _, bad := range []string{".hidden", "-x", "a/b", "", strings.Repeat("x", 200), "é"} {
		assert.ErrorIs(t, plan.ValidUUID(bad), plan.ErrInvalidUUID, "%q", bad)
		o3 := opts()
		o3.UUID = bad
		_, _, err := plan.Create(servers(1, 2), o3)
		assert.Error(t, err, "%q", bad)
	}

	doc := func(edit func(string) string) error {
		data, err := plan.Encode(p)
		require.NoError(t, err)
		_, err = plan.Decode([]byte(edit(string(data))))
		return err
	}
	// Core after non-core: would stall forever.
	assert.ErrorIs(t, doc(func(s string) string {
		return strings.Replace(s, `"server_uuid": "u002",`, `"server_uuid": "u002", "core": true,`, 1)
	}), plan.ErrDecode)
	// A job step without a job uuid.
	assert.ErrorIs(t, doc(func(s string) string {
		return strings.Replace(s, `"server_uuid": "u001",`, `"server_uuid": "u001", "step": "job",`, 1)
	}), plan.ErrDecode)
	// A time Encode cannot write back.
	assert.ErrorIs(t, doc(func(s string) string {
		return strings.Replace(s, `"state"`, `"created_at": "2026-01-01T00:00:00+24:00", "state"`, 1)
	}), plan.ErrDecode)
}

// Issue 13 D: the drain timeout is measured on the executor's clock, not
// from the fleet's job StartedAt: a fleet clock a little ahead must not
// fail a job that started a second ago.
func TestRegressionDrainTimeoutOneClock(t *testing.T) {
	p := plan.Plan{UUID: "p", State: plan.StateRunning, Concurrency: 1,
		Reboots: []plan.Reboot{{ServerUUID: "s", Step: plan.StepJob, JobUUID: "j"}}}
	now := fake.Epoch
	p.Reboots[0].StepSince = &now
	obs := plan.Observations{Servers: map[string]plan.ServerObs{"s": {}},
		Jobs: map[string]plan.JobObs{"j": {Exists: true, Started: true, StartedAt: now.Add(-time.Hour)}}}
	q, acts := plan.Config{DrainTimeout: 15 * time.Minute}.Next(p, obs, now.Add(time.Second))
	assert.Equal(t, plan.StepJob, q.Reboots[0].Step, "failed on the fleet's clock")
	assert.Empty(t, acts)
	q, _ = plan.Config{DrainTimeout: 15 * time.Minute}.Next(q, obs, now.Add(16*time.Minute))
	assert.Equal(t, plan.StepCancelJob, q.Reboots[0].Step, "15 minutes on the executor's clock")
}

// Issue 13 E: hostile files in a FileStore directory.
func TestRegressionFileStoreHostileInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := plan.FileStore{Dir: dir}
	p, _, err := plan.Create(servers(1, 2), opts())
	require.NoError(t, err)
	q := p.Clone()
	q.UUID = "p2"
	q.Reboots = q.Reboots[:0]
	require.NoError(t, s.Create(ctx, q))

	// A file whose uuid differs from its name: loading it would save it
	// over the other plan.
	data, err := plan.Encode(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p2x.json"), data, 0o644))
	_, err = s.Get(ctx, "p2x")
	assert.ErrorIs(t, err, plan.ErrCorrupt)

	// A FIFO must not block a read.
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644))
	done := make(chan error, 1)
	go func() { _, err := s.Get(ctx, "fifo"); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, plan.ErrCorrupt)
	case <-time.After(2 * time.Second):
		t.Fatal("Get blocked on a FIFO")
	}
	// A directory in a plan's place: the same error from Get and List,
	// and Put never renames over it.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "p3.json"), 0o755))
	_, err = s.Get(ctx, "p3")
	assert.ErrorIs(t, err, plan.ErrCorrupt)
	r := q.Clone()
	r.UUID = "p3"
	assert.Error(t, s.Put(ctx, r))
	fi, err := os.Stat(filepath.Join(dir, "p3.json"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "Put replaced what it could not read")
	// An oversized document is refused before it is read.
	f, err := os.Create(filepath.Join(dir, "big.json"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(plan.MaxDocumentBytes+1))
	f.Close()
	_, err = s.Get(ctx, "big")
	assert.ErrorIs(t, err, plan.ErrTooLarge)
	// A file with a name that is not a plan UUID is reported by List.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".sneaky.json"), data, 0o644))
	plans, err := s.List(ctx)
	require.ErrorIs(t, err, plan.ErrCorrupt)
	for _, name := range []string{"p2x.json", "fifo.json", "p3.json", "big.json", ".sneaky.json"} {
		assert.Contains(t, err.Error(), name)
	}
	require.Len(t, plans, 1)
	assert.Equal(t, "p2", plans[0].UUID)
	got, err := s.Get(ctx, "p2")
	require.NoError(t, err)
	assert.Equal(t, "p2", got.UUID, "nothing else was lost")

	// Compare-and-swap: a stale version loses.
	got2 := got
	got2.State = plan.StateStopped
	require.NoError(t, s.Put(ctx, got2))
	got.State = plan.StateRunning
	assert.True(t, errors.Is(s.Put(ctx, got), plan.ErrConflict))
}
