package inventory

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ServerStatus is where one server stands, for watch and show.
type ServerStatus struct {
	UUID     string `json:"uuid"`
	Hostname string `json:"hostname"`
	// Job and JobState: its live job, or the last one.
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
// settled, or a BMC error no call has cleared.
func (f *Fleet) Status() ([]ServerStatus, error) {
	var out []ServerStatus
	jobs := map[string]JobRecord{}
	err := f.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
			var j JobRecord
			if err := json.Unmarshal(v, &j); err != nil {
				return err
			}
			if prev, ok := jobs[j.Server]; !ok || !j.Over() || prev.Over() && j.Created.After(prev.Created) {
				if !ok || prev.Over() {
					jobs[j.Server] = j
				}
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			j := jobs[string(k)]
			errShown := h.LastError.Message != "" && !h.LastError.Cleared
			if (j.UUID == "" || j.Over() && !h.needsKeeping() && !errShown) && h.Abandoned == "" {
				return nil
			}
			s, _ := f.inv.Server(string(k))
			st := ServerStatus{UUID: string(k), Hostname: s.Hostname, Job: j.UUID, JobState: j.State, Phase: h.Phase, PhaseSince: h.PhaseSince, Abandoned: h.Abandoned}
			if errShown {
				e := h.LastError
				st.LastError = &e
			}
			out = append(out, st)
			return nil
		})
	})
	return out, err
}
