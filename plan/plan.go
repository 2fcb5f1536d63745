package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// State is a plan's state. The seed's states are created, stopped,
// running, canceled and complete; this package adds failed, for a plan that
// ended because reboots failed, so that complete always means every reboot
// succeeded.
type State string

// Plan states.
const (
	StateCreated  State = "created"
	StateRunning  State = "running"
	StateStopped  State = "stopped"
	StateCanceled State = "canceled"
	StateComplete State = "complete"
	StateFailed   State = "failed"
)

// Finished reports whether no new reboot will ever start (in-flight ones
// may still be finishing).
func (s State) Finished() bool {
	return s == StateCanceled || s == StateComplete || s == StateFailed
}

// Step is where one server's reboot stands. Each step is recorded before
// the next starts, so a restarted executor resumes at the right place.
type Step string

// Steps of one reboot, in order. The zero value is StepPending.
const (
	StepPending    Step = ""
	StepWaitHead   Step = "wait_headnode"   // wait for the headnode's services
	StepFreeze     Step = "freeze"          // freeze the database shard (primary here)
	StepJob        Step = "job"             // reboot job created; waiting for it
	StepServices   Step = "wait_services"   // job done; waiting for the services
	StepUnfreeze   Step = "unfreeze"        // check the shard, unfreeze it
	StepDone       Step = "done"            // operational
	StepFailed     Step = "failed"          // canceled_at and error are set
	StepFailFreeze Step = "failed_unfreeze" // failed; the shard must still be unfrozen
)

// InFlight reports whether the reboot has started and not ended.
func (s Step) InFlight() bool {
	switch s {
	case StepWaitHead, StepFreeze, StepJob, StepServices, StepUnfreeze, StepFailFreeze:
		return true
	}
	return false
}

// Ended reports whether the reboot succeeded or failed for good.
func (s Step) Ended() bool { return s == StepDone || s == StepFailed }

// Reboot is one server's entry in a plan (the seed's fields, then this
// package's bookkeeping).
type Reboot struct {
	ServerUUID      string     `json:"server_uuid"`
	ServerHostname  string     `json:"server_hostname"`
	BootPlatform    string     `json:"boot_platform"`
	CurrentPlatform string     `json:"current_platform"`
	Headnode        bool       `json:"headnode"`
	JobUUID         string     `json:"job_uuid,omitempty"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	OperationalAt   *time.Time `json:"operational_at,omitempty"`
	CanceledAt      *time.Time `json:"canceled_at,omitempty"`

	// Core: the server hosts core services (the headnode is core).
	Core bool `json:"core,omitempty"`
	// Step is the reboot's progress; StepSince when it was entered.
	Step      Step       `json:"step,omitempty"`
	StepSince *time.Time `json:"step_since,omitempty"`
	// Frozen: this reboot froze the database shard and must unfreeze it.
	Frozen bool `json:"frozen,omitempty"`
	// Error says why the reboot failed or was canceled.
	Error string `json:"error,omitempty"`
}

// Plan is a rolling reboot plan, stored as one JSON document.
type Plan struct {
	UUID  string `json:"uuid"`
	State State  `json:"state"`
	// Concurrency is the most servers of the plan offline at once (servers
	// down for other reasons count).
	Concurrency int `json:"concurrency"`
	// FailureBudget is how many reboots may fail before the plan stops
	// starting new ones; failures beyond it end the plan as failed.
	FailureBudget int `json:"failure_budget"`
	// DryRun plans go through the motions without creating reboot jobs.
	DryRun bool `json:"dry_run,omitempty"`
	// Reboots are in execution order: the headnode, other core servers,
	// then the rest.
	Reboots []Reboot `json:"reboots"`
}

// ErrDecode is wrapped by Decode errors.
var ErrDecode = errors.New("plan: invalid plan document")

// Encode returns the plan's JSON document (indented, stable field order).
func Encode(p Plan) ([]byte, error) {
	return json.MarshalIndent(p, "", "  ")
}

// Decode parses a plan document. Unknown fields are rejected (a document
// written by a newer version is not silently truncated), as are documents
// that break the plan's invariants: a missing uuid, an unknown state or
// step, concurrency < 1, duplicate servers, trailing data. Errors wrap
// ErrDecode.
func Decode(data []byte) (Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if dec.More() {
		return Plan{}, fmt.Errorf("%w: trailing data", ErrDecode)
	}
	if err := p.validate(); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return p, nil
}

func (p Plan) validate() error {
	if p.UUID == "" {
		return errors.New("missing uuid")
	}
	switch p.State {
	case StateCreated, StateRunning, StateStopped, StateCanceled, StateComplete, StateFailed:
	default:
		return fmt.Errorf("unknown state %q", p.State)
	}
	if p.Concurrency < 1 {
		return fmt.Errorf("concurrency %d < 1", p.Concurrency)
	}
	if p.FailureBudget < 0 {
		return fmt.Errorf("failure budget %d < 0", p.FailureBudget)
	}
	seen := map[string]bool{}
	for _, r := range p.Reboots {
		if r.ServerUUID == "" {
			return errors.New("reboot without server_uuid")
		}
		if seen[r.ServerUUID] {
			return fmt.Errorf("server %s listed twice", r.ServerUUID)
		}
		seen[r.ServerUUID] = true
		switch r.Step {
		case StepPending, StepWaitHead, StepFreeze, StepJob, StepServices, StepUnfreeze, StepDone, StepFailed, StepFailFreeze:
		default:
			return fmt.Errorf("server %s: unknown step %q", r.ServerUUID, r.Step)
		}
	}
	return nil
}

// Clone returns a deep copy.
func (p Plan) Clone() Plan {
	q := p
	q.Reboots = make([]Reboot, len(p.Reboots))
	for i, r := range p.Reboots {
		for _, t := range []**time.Time{&r.StartedAt, &r.FinishedAt, &r.OperationalAt, &r.CanceledAt, &r.StepSince} {
			if *t != nil {
				v := **t
				*t = &v
			}
		}
		q.Reboots[i] = r
	}
	return q
}

// Unfinished reports whether the plan may still reboot servers: it is not
// finished, or reboots are still in flight.
func (p Plan) Unfinished() bool {
	if !p.State.Finished() {
		return true
	}
	for _, r := range p.Reboots {
		if r.Step.InFlight() {
			return true
		}
	}
	return false
}

// MayRebootOutside is the guard of the seed: while a plan is unfinished, a
// server in it may only be rebooted by that plan (planUUID equal to the
// plan's uuid). Servers in no unfinished plan may be rebooted.
func MayRebootOutside(plans []Plan, serverUUID, planUUID string) (bool, string) {
	for _, p := range plans {
		if !p.Unfinished() || p.UUID == planUUID {
			continue
		}
		for _, r := range p.Reboots {
			if r.ServerUUID == serverUUID {
				return false, fmt.Sprintf("server %s is in unfinished reboot plan %s", serverUUID, p.UUID)
			}
		}
	}
	return true, "not in an unfinished plan"
}
