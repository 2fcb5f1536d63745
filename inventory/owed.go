package inventory

import (
	"encoding/json"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// What a fleet state file still owes a server (Owed.What).
const (
	// OwedJob: its job has not ended; it may still drain the server,
	// power-cycle it, or undrain it (every end of a job undoes its drain).
	OwedJob = "job"
	// OwedPower: its power cycle has not settled (its job gave up on it
	// at the job timeout, or ended less than Options.ShutdownMax after a
	// power-off): the server may be off, or a power-off sent to it may
	// still land, and the fleet powers it on if it reads off.
	OwedPower = "power"
)

// Owed is a server the fleet state file still owes something: only an
// executor with this file does it (another file knows nothing of it).
type Owed struct {
	Server   string `json:"server"`
	Hostname string `json:"hostname,omitempty"`
	// Plan and Job: the job (and its plan) that owes it; for OwedPower,
	// the job whose power cycle has not settled ("" if not known).
	Plan string `json:"plan,omitempty"`
	Job  string `json:"job,omitempty"`
	// What is OwedJob or OwedPower.
	What string `json:"what"`
}

// Owed lists the servers this fleet state file still owes something, by
// hostname: those with a live job (OwedJob), and those whose power cycle
// has not settled (OwedPower), but the operator's abandons (Abandon: the
// fleet owes them nothing more). It reads those servers' records only,
// never every record of the file, and each live job's record once: the
// plan of a job it named before is kept (a job's plan never changes).
func (f *Fleet) Owed() ([]Owed, error) {
	f.mu.Lock()
	live := make(map[string]string, len(f.liveJob))
	for s, j := range f.liveJob {
		live[s] = j
	}
	power := make([]string, 0, len(f.keeping))
	for s := range f.keeping {
		if _, ok := live[s]; !ok && !f.abandoned[s] {
			power = append(power, s)
		}
	}
	cached := make(map[string]string, len(live))
	for _, j := range live {
		if p, ok := f.jobPlan[j]; ok {
			cached[j] = p
		}
	}
	f.mu.Unlock()
	var out []Owed
	err := f.db.View(func(tx *bolt.Tx) error {
		jb, hb := tx.Bucket(bucketJobs), tx.Bucket(bucketHosts)
		planOf := func(job string) string {
			if p, ok := cached[job]; ok || job == "" {
				return p
			}
			var j JobRecord
			if raw := jb.Get([]byte(job)); raw != nil && json.Unmarshal(raw, &j) == nil {
				cached[job] = j.Plan
				return j.Plan
			}
			return ""
		}
		for s, job := range live {
			out = append(out, Owed{Server: s, Hostname: f.hostname(s), Plan: planOf(job), Job: job, What: OwedJob})
		}
		for _, s := range power {
			var h hostRecord
			if raw := hb.Get([]byte(s)); raw != nil {
				if err := json.Unmarshal(raw, &h); err != nil {
					return err
				}
			}
			if !h.needsKeeping() {
				continue // settled since (the map is updated after the record)
			}
			out = append(out, Owed{Server: s, Hostname: f.hostname(s), Plan: planOf(h.Job), Job: h.Job, What: OwedPower})
		}
		return nil
	})
	if err == nil {
		f.mu.Lock()
		f.jobPlan = cached // only the jobs named now: ended ones drop out
		f.mu.Unlock()
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Hostname != out[k].Hostname {
			return out[i].Hostname < out[k].Hostname
		}
		return out[i].Server < out[k].Server
	})
	return out, err
}

// hostname is the inventory's hostname of server, its UUID if the
// inventory has none.
func (f *Fleet) hostname(server string) string {
	if s, ok := f.inv.Server(server); ok && s.Hostname != "" {
		return s.Hostname
	}
	return server
}
