package inventory

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/rebootkit/rebootkit/plan"
)

// neededBy is the executor's rule (cmd/rebootctl jobNeeded) over the
// world's plan store: a plan needs a job while its reboot of it has not
// ended.
func (w *world) neededBy(j JobRecord) bool {
	p, err := w.store.Get(w.ctx(), j.Plan)
	if err != nil {
		return false
	}
	for _, r := range p.Reboots {
		if r.JobUUID == j.UUID && !r.Step.Ended() {
			return true
		}
	}
	return false
}

// runPruning runs the world for d, pruning after every pass as the
// executor does; it returns the most jobs the state file held.
func (w *world) runPruning(ids []string, d time.Duration) int {
	most := 0
	for end := w.clk.Real().Add(d); w.clk.Real().Before(end); w.clk.Advance(time.Second) {
		w.pass()
		if _, err := w.f.Prune(w.neededBy); err != nil {
			w.t.Fatalf("prune: %v", err)
		}
		for _, id := range ids {
			w.step(id)
		}
		w.check()
		jobs, err := w.f.Jobs()
		if err != nil {
			w.t.Fatalf("jobs: %v", err)
		}
		most = max(most, len(jobs))
	}
	return most
}

// TestPruneKeepsStateFileSmall (issue 38, point 15): four plans, one after
// the other, over three servers. The fleet state file holds the jobs of
// at most the plan in flight and the one before it (within the
// retention), never every job ever recorded; every server was
// power-cycled exactly once per plan (ground truth: no pruned job was
// created again), and Status still works. Old code: nothing was ever
// removed, so the file held 3 jobs per plan (12), and every pass's Status
// read them all.
func TestPruneKeepsStateFileSmall(t *testing.T) {
	w, ids := newWorld(t, 3, 3)
	w.open()
	defer w.close()
	w.f.opts.JobRetention = time.Second
	const plans = 4
	most := 0
	for k := range plans {
		w.newPlan()
		for i := 0; i < 60; i++ {
			most = max(most, w.runPruning(ids, time.Minute))
			p, err := w.store.Get(w.ctx(), w.plans[k])
			require.NoError(t, err)
			if !p.Unfinished() {
				require.Equal(t, plan.StateComplete, p.State, plan.Table(p))
				break
			}
		}
	}
	most = max(most, w.runPruning(ids, 5*time.Minute))
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	assert.Empty(t, jobs, "every job of the ended plans pruned once its retention passed")
	assert.LessOrEqual(t, most, 2*len(ids), "at most the jobs of the plan in flight and of the one before")
	for _, id := range ids {
		assert.Equal(t, plans, w.bmcs[id].p.Cycles(), "server %s power-cycled once per plan (ground truth)", id)
	}
	st, err := w.f.Status()
	require.NoError(t, err)
	assert.Empty(t, st, "nothing left to show")
}

// TestPruneKeepsWhatIsNeeded (issue 38, point 15): a job its plan still
// reads (its reboot has not ended) is never pruned, nor, once the BMC
// died mid-cycle, the job whose power cycle has not settled (its end
// bounds how long the server counts as down); a restarted fleet knows
// which jobs ended.
func TestPruneKeepsWhatIsNeeded(t *testing.T) {
	w, ids := offThenDead(t)
	defer func() { w.close() }()
	w.f.opts.JobRetention = time.Minute
	w.run(ids, w.cfg.JobTimeout+5*time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.True(t, jobs[0].Over())
	w.clk.Advance(2 * time.Minute) // due again (the passes looked at it)
	n, err := w.f.Prune(func(JobRecord) bool { return true })
	require.NoError(t, err)
	assert.Zero(t, n, "a job its plan needs stays")
	w.clk.Advance(2 * time.Minute) // looked at again one retention later
	n, err = w.f.Prune(func(JobRecord) bool { return false })
	require.NoError(t, err)
	assert.Zero(t, n, "a job whose power cycle has not settled stays")
	// The BMC answers again: the server is powered on and settles.
	w.clk.Advance(2 * time.Minute)
	n, err = w.f.Prune(func(JobRecord) bool { return false })
	require.NoError(t, err)
	assert.Zero(t, n, "still not settled")
	w.f.opts.JobRetention = 24 * time.Hour // kept until the restart below
	w.bmcs[ids[0]].mode = bmcOK
	// Until it settles (BMC calls have a real-time deadline: under a
	// loaded -race run some time out and are tried again).
	for i := 0; i < 60; i++ {
		w.run(ids, time.Minute)
		if h, err := w.f.hosts.load(ids[0]); err == nil && !h.needsKeeping() {
			break
		}
	}
	require.True(t, w.bmcs[ids[0]].p.HardwareOn())
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	require.False(t, h.needsKeeping(), "settled: %+v", h)
	// Restarted: the fleet finds the ended job in the file.
	w.close()
	w.open()
	w.f.opts.JobRetention = time.Minute
	n, err = w.f.Prune(func(JobRecord) bool { return false })
	require.NoError(t, err)
	assert.Equal(t, 1, n, "settled and not needed: pruned")
	jobs, err = w.f.Jobs()
	require.NoError(t, err)
	assert.Empty(t, jobs)
}

// BenchmarkPassBookkeeping measures what an executor pass costs the
// fleet state file besides the plans' own observations (Status for the
// heartbeat, and Prune) with so many ended jobs of past plans recorded
// and not yet pruned: flat, whatever the history. Old code: Status read
// every job and every host record at every pass.
//
//	go test -run XXX -bench BenchmarkPassBookkeeping -benchmem ./inventory/
func BenchmarkPassBookkeeping(b *testing.B) {
	for _, history := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(history), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "fleet.db")
			inv := Inventory{}
			for i := range 100 {
				inv.Servers = append(inv.Servers, Server{UUID: fmt.Sprintf("s%03d", i), Hostname: fmt.Sprintf("cn%d", i),
					BMC: BMC{Redfish: fmt.Sprintf("https://bmc%d", i), Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"}})
			}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			f, err := OpenFleet(inv, path, Options{manual: true, Now: func() time.Time { return now }})
			require.NoError(b, err)
			require.NoError(b, f.db.Update(func(tx *bolt.Tx) error {
				jb := tx.Bucket(bucketJobs)
				for i := range history {
					end := now.Add(-time.Minute)
					raw, _ := json.Marshal(JobRecord{UUID: fmt.Sprintf("job-%07d", i), Server: fmt.Sprintf("s%03d", i%100), Plan: fmt.Sprintf("p%d", i/100),
						State: JobDone, Created: end, Ended: &end})
					if err := jb.Put([]byte(fmt.Sprintf("job-%07d", i)), raw); err != nil {
						return err
					}
				}
				return nil
			}))
			require.NoError(b, f.Close())
			f, err = OpenFleet(inv, path, Options{manual: true, Now: func() time.Time { return now }})
			require.NoError(b, err)
			defer f.Close()
			// Their ends within the retention, or their plans still looking
			// (asked again once a retention later): nothing to remove.
			needed := func(JobRecord) bool { return true }
			b.ResetTimer()
			for b.Loop() {
				if _, err := f.Prune(needed); err != nil {
					b.Fatal(err)
				}
				if _, err := f.Status(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
