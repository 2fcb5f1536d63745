package inventory

import (
	"encoding/json"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ServerStatus is where one server stands, for watch and show.
type ServerStatus struct {
	UUID     string `json:"uuid"`
	Hostname string `json:"hostname"`
	// Job and JobState: its live job, or the last one (while the state
	// file keeps it: Options.JobRetention).
	Job      string `json:"job,omitempty"`
	JobState string `json:"job_state,omitempty"`
	// Phase is where its power cycle stands (soft power-off, hard
	// power-off, held off, powering on, on), since PhaseSince.
	Phase      string    `json:"phase,omitempty"`
	PhaseSince time.Time `json:"phase_since,omitzero"`
	// Abandoned says why the operator gave up on it ("" if not): the
	// executor never powers it again; Phase is its last known state.
	Abandoned string `json:"abandoned,omitempty"`
	// LastError is its last BMC error, if no call succeeded since.
	LastError *BMCError `json:"last_error,omitempty"`
}

// Status lists the servers with a live job, a power cycle that has not
// settled, a BMC error no call has cleared, or the operator's abandon.
// It reads those servers' records only (kept in memory which they are),
// never every record of the state file.
func (f *Fleet) Status() ([]ServerStatus, error) {
	f.mu.Lock()
	jobOf := make(map[string]string, len(f.shown)+len(f.liveJob))
	for s := range f.shown {
		jobOf[s] = f.lastJob[s]
	}
	for s, id := range f.liveJob {
		jobOf[s] = id
	}
	f.mu.Unlock()
	servers := make([]string, 0, len(jobOf))
	for s := range jobOf {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	var out []ServerStatus
	err := f.db.View(func(tx *bolt.Tx) error {
		jb, hb := tx.Bucket(bucketJobs), tx.Bucket(bucketHosts)
		for _, s := range servers {
			var h hostRecord
			if raw := hb.Get([]byte(s)); raw != nil {
				if err := json.Unmarshal(raw, &h); err != nil {
					return err
				}
			}
			var j JobRecord
			if id := jobOf[s]; id != "" {
				if raw := jb.Get([]byte(id)); raw != nil {
					if err := json.Unmarshal(raw, &j); err != nil {
						return err
					}
				}
			}
			errShown := h.LastError.Message != "" && !h.LastError.Cleared
			if (j.UUID == "" || j.Over()) && !h.interesting() {
				continue
			}
			srv, _ := f.inv.Server(s)
			st := ServerStatus{UUID: s, Hostname: srv.Hostname, Job: j.UUID, JobState: j.State, Phase: h.Phase, PhaseSince: h.PhaseSince, Abandoned: h.Abandoned}
			if errShown {
				e := h.LastError
				st.LastError = &e
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}
