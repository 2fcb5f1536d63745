package inventory

import (
	"container/heap"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// endedJob is what the fleet keeps in memory of a job that ended and is
// still in the state file, until Prune removes it.
type endedJob struct {
	id, plan, server string
	at               time.Time // when it ended (or was last found needed)
}

// endedHeap orders the ended jobs by end, so that a pass looks only at
// those whose retention has passed.
type endedHeap []endedJob

func (h endedHeap) Len() int           { return len(h) }
func (h endedHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h endedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endedHeap) Push(x any)        { *h = append(*h, x.(endedJob)) }
func (h *endedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// trackJobs records, at open, which jobs of the state file are still
// open (not known to have ended) and which ended, and each server's last
// job (for Status), so that no pass has to read every job again.
func (f *Fleet) trackJobs(jobs []JobRecord) {
	last := map[string]time.Time{}
	defer heap.Init(&f.endedJobs)
	for _, j := range jobs {
		if !j.Over() {
			f.openJobs[j.UUID] = j.Server
		} else {
			f.endedJobs = append(f.endedJobs, endedJob{id: j.UUID, plan: j.Plan, server: j.Server, at: endOf(j)})
		}
		if id, ok := f.liveJob[j.Server]; ok {
			f.lastJob[j.Server] = id
		} else if at, ok := last[j.Server]; !ok || j.Created.After(at) {
			last[j.Server], f.lastJob[j.Server] = j.Created, j.UUID
		}
	}
}

// endOf is when job j ended (records written before Ended was kept: the
// time of its last state).
func endOf(j JobRecord) time.Time {
	if j.Ended != nil {
		return *j.Ended
	}
	return j.StateAt
}

// Prune removes from the fleet state file the jobs that ended at least
// Options.JobRetention ago and that nothing needs any more, so that the
// file, and what a pass reads of it, stays the size of the jobs in flight
// however many plans ran. needed(j) says whether j's plan may still look
// at it: a plan that has not seen its reboot end (the executor answers
// yes while the plan's reboot of that job has not ended, or when it could
// not read the plan); a job is never pruned before its plan has recorded
// its end, so that no plan ever recreates it (plan job UUIDs are
// deterministic). A job whose server's power cycle has not settled is
// kept as well: the server's record still names it as the job whose power
// cycle the fleet completes. (Neither the job nor its end bounds how long
// the server counts as down: the power cycle's cut-off does, offHorizon,
// the last power-off sent to the server plus Options.ShutdownMax; the
// server counts as down until a health check begun after it passes.) What
// plan show and plan report say of an ended plan is in the plan store
// (its reboots, their phases and errors), not here.
//
// Prune reads the record of each job that ended since the last call, and
// nothing else: its cost is O(jobs not yet pruned), never O(jobs ever
// recorded). It returns how many jobs it removed.
func (f *Fleet) Prune(needed func(j JobRecord) bool) (int, error) {
	// Jobs that ended since the last call (no longer live in memory).
	f.mu.Lock()
	live := make(map[string]bool, len(f.liveJob))
	for _, id := range f.liveJob {
		live[id] = true
	}
	var check []string
	for id := range f.openJobs {
		if !live[id] {
			check = append(check, id)
		}
	}
	f.mu.Unlock()
	for _, id := range check {
		j, ok, err := f.job(id)
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		switch {
		case !ok:
			delete(f.openJobs, id)
		case j.Over():
			delete(f.openJobs, id)
			heap.Push(&f.endedJobs, endedJob{id: id, plan: j.Plan, server: j.Server, at: endOf(j)})
		}
		f.mu.Unlock()
	}
	now := f.now()
	var due []endedJob
	f.mu.Lock()
	for len(f.endedJobs) > 0 && now.Sub(f.endedJobs[0].at) >= f.opts.JobRetention {
		due = append(due, heap.Pop(&f.endedJobs).(endedJob))
	}
	f.mu.Unlock()
	var gone []endedJob
	var keep []endedJob // looked at again after another retention
	for _, e := range due {
		if needed(JobRecord{UUID: e.id, Plan: e.plan, Server: e.server}) {
			keep = append(keep, e)
		} else {
			gone = append(gone, e)
		}
	}
	removed := 0
	if len(gone) > 0 {
		err := f.db.Update(func(tx *bolt.Tx) error {
			jb, hb := tx.Bucket(bucketJobs), tx.Bucket(bucketHosts)
			removed = 0
			for _, e := range gone {
				raw := jb.Get([]byte(e.id))
				if raw == nil {
					continue
				}
				var j JobRecord
				if err := json.Unmarshal(raw, &j); err != nil {
					return err
				}
				if !j.Over() {
					continue // cannot happen: a job never leaves its end
				}
				if hraw := hb.Get([]byte(j.Server)); hraw != nil {
					var h hostRecord
					if err := json.Unmarshal(hraw, &h); err != nil {
						return err
					}
					if h.Job == j.UUID && h.needsKeeping() {
						keep = append(keep, e) // its power cycle has not settled
						continue
					}
				}
				if err := jb.Delete([]byte(e.id)); err != nil {
					return err
				}
				removed++
			}
			return nil
		})
		if err != nil {
			f.requeue(append(keep, gone...), now)
			return 0, err
		}
	}
	f.requeue(keep, now)
	if removed > 0 {
		f.debugf("ended jobs pruned from the fleet state file", "jobs", removed)
	}
	return removed, nil
}

// interesting reports whether Status shows a server with this record
// (besides a live job): a power cycle not settled, a BMC error no call
// has cleared, or the operator's abandon.
func (h hostRecord) interesting() bool {
	return h.needsKeeping() || h.LastError.Message != "" && !h.LastError.Cleared || h.Abandoned != "" || h.SelfRebootBoot != ""
}

// noteHost keeps the set of servers Status shows up to date with a host
// record just written.
func (f *Fleet) noteHost(name string, h hostRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.interesting() {
		f.shown[name] = true
	} else {
		delete(f.shown, name)
	}
	if h.Abandoned != "" {
		f.abandoned[name] = true
	} else {
		delete(f.abandoned, name)
	}
	if h.SelfRebootBoot != "" {
		f.selfReboots[name] = true
	} else {
		delete(f.selfReboots, name)
	}
}

// requeue puts ended jobs back to be looked at again one retention after
// now.
func (f *Fleet) requeue(jobs []endedJob, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range jobs {
		e.at = now
		heap.Push(&f.endedJobs, e)
	}
}
