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
	StepFailFreeze Step = "failed_unfreeze" // failed; the shard must still be unfrozen (asked each pass; no slot held: Offline)
	StepCancelJob  Step = "cancel_job"      // timed out; the job is being cancelled and may still reboot the server
	// StepReleased: the plan was canceled or ended while the reboot was
	// held before its job could start (a window, a condition, the ramp, a
	// domain limit), or the fleet never showed its job in JobTimeout of
	// deciding to ask for it (the fleet refused or lost it, or the calls
	// never reached it); it never started and is not a failure (but a
	// plan with a released reboot never ends complete).
	StepReleased Step = "released"
)

// InFlight reports whether the reboot has started and not ended.
func (s Step) InFlight() bool {
	switch s {
	case StepWaitHead, StepFreeze, StepJob, StepServices, StepUnfreeze, StepFailFreeze, StepCancelJob:
		return true
	}
	return false
}

// Ended reports whether the reboot succeeded or failed for good, or was
// released without starting (StepReleased).
func (s Step) Ended() bool { return s == StepDone || s == StepFailed || s == StepReleased }

// held reports whether r left pending but no job of it runs: it waits in
// wait_headnode, and either no job of it was ever asked for or the one
// asked for was taken for lost (the fleet did not show it in time) and
// the fleet shows it still not. Its server is not offline because of it
// (Offline). (A reboot in freeze keeps its slot while the shard freezes.)
func (r Reboot) held(obs Observations) bool {
	return r.Step == StepWaitHead && (r.JobUUID == "" || !obs.Jobs[r.JobUUID].Exists)
}

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
	// JobSeen: the fleet has reported the job. A job seen once and then
	// missing was garbage-collected, never lost: it is not created again.
	JobSeen bool `json:"job_seen,omitempty"`
	// DrainSince is when the executor first saw the job started (its own
	// clock: the drain timeout never compares two clocks).
	DrainSince *time.Time `json:"drain_since,omitempty"`
	// JobCreatedAt is when its reboot job was (last) asked for: the
	// maintenance windows' fit measures reboots from there (the queue
	// counts).
	JobCreatedAt *time.Time `json:"job_created_at,omitempty"`
	// AskedAt is when its reboot job was first asked for and not shown
	// since: kept through the asks again after the job was taken for lost
	// (Config.ShowTimeout), cleared when the fleet shows the job or the
	// reboot is held by the plan's limits. A job the fleet has not shown
	// JobTimeout after AskedAt is given up: the reboot is released
	// (StepReleased), not started and not failed.
	AskedAt *time.Time `json:"asked_at,omitempty"`
	// ShowFrom is when Config.ShowTimeout started for the job last asked
	// for and not shown yet: the start of the first pass after the one
	// that asked (JobCreatedAt is when that pass decided, before its save
	// and its CreateJob calls, which may take long). Every call of the
	// ask had returned by then: an executor's passes are sequential, and
	// a deposed leader's late calls are fenced (Action.Fence). Until
	// ShowTimeout after it the job may run, so its server counts offline;
	// after it the job is taken for lost. Cleared when the job is asked
	// for again or shown.
	ShowFrom *time.Time `json:"show_from,omitempty"`
	// Phases are when the reboot's job reached each phase, as the fleet
	// reported them (JobObs.Phases); for reports only, no decision reads
	// them.
	Phases *Phases `json:"phases,omitempty"`
	// Labels are the server's labels when the plan was created (e.g.
	// rack: r12, zone: z1): its failure domains (Plan.DomainLimits).
	Labels map[string]string `json:"labels,omitempty"`
}

// Plan is a rolling reboot plan, stored as one JSON document.
type Plan struct {
	UUID  string `json:"uuid"`
	State State  `json:"state"`
	// CreatedAt makes job identities unique per plan (JobUUID).
	CreatedAt *time.Time `json:"created_at,omitempty"`
	// Waiting says why the last pass could not start a reboot it would
	// have started, e.g. "3 servers offline, concurrency 2", or else what
	// a reboot in flight waits for (the headnode's services, the shard,
	// a server back up whose services are not, a server still down after
	// its job finished) ("" if none).
	Waiting string `json:"waiting,omitempty"`
	// Concurrency is the most servers of the plan offline at once (servers
	// down for other reasons count).
	Concurrency int `json:"concurrency"`
	// FailureBudget is how many reboots may fail before the plan stops
	// starting new ones; failures beyond it end the plan as failed.
	FailureBudget int `json:"failure_budget"`
	// DryRun plans go through the motions without creating reboot jobs;
	// they never block another plan (CheckOthers, Create and
	// MayRebootOutside skip them). A write clearing it on an unfinished
	// plan is checked against the others as Create is (NewlyHolds).
	DryRun bool `json:"dry_run,omitempty"`
	// Windows are the maintenance windows: reboots start only inside one
	// (nil: at any time).
	Windows *Windows `json:"windows,omitempty"`
	// Ramp is the canary ramp: the concurrency of its first stage, then of
	// the next, each stage lasting until as many reboots as its
	// concurrency are done (RampLimit); then Concurrency. Every stage is
	// capped by Concurrency; stages never go down.
	Ramp []int `json:"ramp,omitempty"`
	// DomainLimits cap the servers offline per failure domain (per value
	// of a label), on top of Concurrency.
	DomainLimits []DomainLimit `json:"domain_limits,omitempty"`
	// Conditions must all hold (the last result of each, observed by the
	// fleet, succeeded and is recent) for a reboot to start.
	Conditions []Condition `json:"conditions,omitempty"`
	// WaitingOutput is the output of the blocking condition that held the
	// plan in the last pass ("" if none).
	WaitingOutput string `json:"waiting_output,omitempty"`
	// Reboots are in execution order: the headnode, other core servers,
	// then the rest.
	Reboots []Reboot `json:"reboots"`
	// Commands are the operators' commands (run, stop, cancel), oldest
	// first, the last MaxCommands kept. No decision of this package
	// reads them; a tool that replays commands recorded elsewhere may
	// read them to tell what was applied already (rebootctl does). See
	// Record.
	Commands []Mark `json:"commands,omitempty"`
	// Replays are, per source of numbered commands a tool replays (the
	// last MaxReplays sources), the highest number applied: unlike
	// Commands' times, they tell an applied command from a new one
	// whatever the clocks did, and later commands never push them out.
	// See RecordReplay.
	Replays []Replay `json:"replays,omitempty"`

	// Version is the store's version of the plan, for compare-and-swap
	// (not part of the document).
	Version string `json:"-"`
}

// Limits on plan documents, checked by Decode and the stores.
const (
	// MaxDocumentBytes bounds an encoded plan (about 1,000 bytes per
	// server at MaxServers, with room to spare).
	MaxDocumentBytes = 256 << 20
	// MaxServers bounds the servers of one plan.
	MaxServers = 200_000
)

// ValidUUID checks a plan UUID: 1 to 128 characters, letters, digits, '-',
// '_' and '.', not starting with '.' or '-' (so that it is a safe file
// name and key everywhere). Errors wrap ErrInvalidUUID.
func ValidUUID(uuid string) error {
	if uuid == "" || len(uuid) > 128 {
		return fmt.Errorf("%w: %q must be 1 to 128 characters", ErrInvalidUUID, uuid)
	}
	for i := 0; i < len(uuid); i++ {
		c := uuid[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (c == '-' || c == '_' || c == '.') && i > 0
		if !ok {
			return fmt.Errorf("%w: %q: letters, digits, '-', '_', '.' only, starting with a letter or digit", ErrInvalidUUID, uuid)
		}
	}
	return nil
}

// ErrDecode is wrapped by Decode errors.
var ErrDecode = errors.New("plan: invalid plan document")

// Encode returns the plan's JSON document (indented, stable field order).
func Encode(p Plan) ([]byte, error) {
	return json.MarshalIndent(p, "", "  ")
}

// Decode parses a plan document. Unknown fields are rejected (a document
// written by a newer version is not silently truncated), as are documents
// that break the plan's invariants: an invalid uuid, an unknown state or
// step, concurrency < 1, duplicate servers, core servers after non-core
// ones (or a headnode not first), a started reboot after a pending one
// (reboots start in order), a reboot in a job step without a job
// uuid, trailing data, a document Encode cannot write back (a time offset
// of +24:00, a year past 9999), more than MaxServers servers or
// MaxDocumentBytes bytes. Errors wrap ErrDecode (and ErrTooLarge for the
// limits).
func Decode(data []byte) (Plan, error) {
	if len(data) > MaxDocumentBytes {
		return Plan{}, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrDecode, ErrTooLarge, len(data), MaxDocumentBytes)
	}
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
		return Plan{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	// Accept only what can be written back: a plan that decodes but cannot
	// be encoded would fail every later save and be stuck for good.
	if _, err := Encode(p); err != nil {
		return Plan{}, fmt.Errorf("%w: cannot be written back: %v", ErrDecode, err)
	}
	return p, nil
}

// Validate checks the plan's invariants (the ones Decode checks); stores
// call it before they write.
func (p Plan) Validate() error { return p.validate() }

func (p Plan) validate() error {
	if err := ValidUUID(p.UUID); err != nil {
		return err
	}
	if len(p.Reboots) > MaxServers {
		return fmt.Errorf("%w: %d servers, limit %d", ErrTooLarge, len(p.Reboots), MaxServers)
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
	if err := p.checkPolicy(); err != nil {
		return err
	}
	seen := map[string]bool{}
	nonCore, pending := false, false
	for i, r := range p.Reboots {
		// Reboots start in plan order: the started ones come first.
		if r.Step != StepPending && pending {
			return fmt.Errorf("server %s: step %q after a pending reboot (reboots start in order)", r.ServerUUID, r.Step)
		}
		pending = pending || r.Step == StepPending
		if r.ServerUUID == "" {
			return errors.New("reboot without server_uuid")
		}
		switch {
		case r.Headnode && (i != 0 || !r.Core):
			return fmt.Errorf("server %s: the headnode must be first and core", r.ServerUUID)
		case r.Core && nonCore:
			return fmt.Errorf("server %s: core servers must come before the others", r.ServerUUID)
		case !r.Core:
			nonCore = true
		}
		if r.JobUUID == "" && (r.Step == StepJob || r.Step == StepServices || r.Step == StepCancelJob) {
			return fmt.Errorf("server %s: step %q without a job_uuid", r.ServerUUID, r.Step)
		}
		if err := checkLabels(r.Labels); err != nil {
			return fmt.Errorf("server %s: %w", r.ServerUUID, err)
		}
		if err := r.checkBounds(); err != nil {
			return fmt.Errorf("server %.64s: %w", r.ServerUUID, err)
		}
		if seen[r.ServerUUID] {
			return fmt.Errorf("server %s listed twice", r.ServerUUID)
		}
		seen[r.ServerUUID] = true
		switch r.Step {
		case StepPending, StepWaitHead, StepFreeze, StepJob, StepServices, StepUnfreeze, StepDone, StepFailed, StepFailFreeze, StepCancelJob, StepReleased:
		default:
			return fmt.Errorf("server %s: unknown step %q", r.ServerUUID, r.Step)
		}
	}
	return nil
}

// Clone returns a deep copy of what a pass or a command changes: the
// reboots, CreatedAt, Commands and Replays. The policy (Windows, Ramp,
// DomainLimits, Conditions) and the reboots' Labels are shared: nothing
// modifies them in place.
func (p Plan) Clone() Plan {
	q := p
	q.Reboots = cloneReboots(p.Reboots)
	if p.CreatedAt != nil {
		v := *p.CreatedAt
		q.CreatedAt = &v
	}
	q.Commands = append([]Mark(nil), p.Commands...)
	q.Replays = append([]Replay(nil), p.Replays...)
	return q
}

// timeFields are the times r points to (Phases' apart).
func (r *Reboot) timeFields() [9]**time.Time {
	return [...]**time.Time{&r.StartedAt, &r.FinishedAt, &r.OperationalAt, &r.CanceledAt, &r.StepSince, &r.DrainSince, &r.JobCreatedAt, &r.AskedAt, &r.ShowFrom}
}

// timeFields are the times p points to.
func (p *Phases) timeFields() [4]**time.Time {
	return [...]**time.Time{&p.Drained, &p.Off, &p.On, &p.Healthy}
}

// cloneReboots returns a deep copy of rs. The times and phases they point
// to are copied into one allocation each, not one per time: a pass clones
// thousands of reboots.
func cloneReboots(rs []Reboot) []Reboot {
	if rs == nil {
		return nil
	}
	out := make([]Reboot, len(rs))
	copy(out, rs)
	OwnReboots(out)
	return out
}

// OwnReboots makes the reboots of rs point to copies of the times and
// phases they point to, so that rs shares none of them with the reboots
// it was copied from (as Plan.Clone does, without copying rs itself): for
// a store that gathered rs from records it keeps.
func OwnReboots(rs []Reboot) {
	out := rs
	nt, np := 0, 0
	for i := range out {
		r := &out[i]
		for _, t := range r.timeFields() {
			nt += b2i(*t != nil)
		}
		if r.Phases != nil {
			np++
			for _, t := range r.Phases.timeFields() {
				nt += b2i(*t != nil)
			}
		}
	}
	times := make([]time.Time, 0, nt) // never grows: the pointers stay valid
	phases := make([]Phases, 0, np)
	own := func(t **time.Time) {
		if *t != nil {
			times = append(times, **t)
			*t = &times[len(times)-1]
		}
	}
	for i := range out {
		r := &out[i]
		for _, t := range r.timeFields() {
			own(t)
		}
		if r.Phases != nil {
			phases = append(phases, *r.Phases)
			r.Phases = &phases[len(phases)-1]
			for _, t := range r.Phases.timeFields() {
				own(t)
			}
		}
	}
}

// clone returns a deep copy of r.
func (r Reboot) clone() Reboot {
	return cloneReboots([]Reboot{r})[0]
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

// ErrServerInPlan: a server is in another unfinished plan.
var ErrServerInPlan = errors.New("plan: server is in another unfinished plan")

// CheckOthers returns an error wrapping ErrServerInPlan if a server of p is
// in another unfinished plan of others (dry-run plans reboot nothing and
// block nothing). Stores call it in Create.
func CheckOthers(p Plan, others []Plan) error {
	mine := make(map[string]bool, len(p.Reboots))
	for _, r := range p.Reboots {
		mine[r.ServerUUID] = true
	}
	for _, o := range others {
		if o.UUID == p.UUID || !o.Unfinished() || o.DryRun {
			continue
		}
		for _, r := range o.Reboots {
			if mine[r.ServerUUID] {
				return fmt.Errorf("%w: server %s is in plan %s", ErrServerInPlan, r.ServerUUID, o.UUID)
			}
		}
	}
	return nil
}

// ErrEndedOverlaps: a write (Put, PutHead, PutView: an Edit or Command)
// sets a plan that ended unfinished again while a server of it is in
// another unfinished plan. The error also wraps ErrServerInPlan.
var ErrEndedOverlaps = errors.New("plan: a plan that ended cannot run again while another unfinished plan holds its servers")

// CheckResumed is CheckOthers for a write that sets p, a plan that ended,
// unfinished again: an error wrapping ErrEndedOverlaps and
// ErrServerInPlan, with what the operator can do, if a server of p is in
// another unfinished plan of others.
func CheckResumed(p Plan, others []Plan) error {
	if err := CheckOthers(p, others); err != nil {
		return ResumeRefused(p.UUID, err)
	}
	return nil
}

// ResumeRefused is the error of a write setting plan uuid, which ended,
// unfinished again, refused because of err (wrapping ErrServerInPlan).
func ResumeRefused(uuid string, err error) error {
	return fmt.Errorf("plan %s ended: %w: %w: cancel or finish that plan first, or create a new plan for the servers left", uuid, ErrEndedOverlaps, err)
}

// DryRunClearRefused is the error of a write clearing DryRun on plan
// uuid, unfinished, refused because of err (wrapping ErrServerInPlan): a
// dry-run plan blocks no other plan, so another may have been created
// over its servers since.
func DryRunClearRefused(uuid string, err error) error {
	return fmt.Errorf("plan %s is a dry run: it cannot reboot servers another unfinished plan holds: %w: cancel or finish that plan first, or create a new plan for the servers", uuid, err)
}

// NewlyHolds reports whether a write that sets a plan stored unfinished
// (wasUnfinished) and a dry run (wasDryRun) to one unfinished
// (unfinished) and a dry run (dryRun) must be checked against the other
// plans as Create checks a new one: it sets a plan that ended unfinished
// again (CheckResumed), or clears DryRun on an unfinished plan, which then
// holds servers it did not (DryRunClearRefused).
func NewlyHolds(wasUnfinished, wasDryRun, unfinished, dryRun bool) bool {
	return unfinished && (!wasUnfinished || wasDryRun && !dryRun)
}

// ErrDryRunSet: a write (Put, PutHead, PutView: an Edit or Command) sets
// DryRun on a plan stored unfinished and not a dry run. A dry-run plan
// holds no server (CheckOthers, MayRebootOutside skip it), so its reboots
// already started would run on while another plan, or a reboot outside
// any plan, takes the same servers. DryRun only goes from true to false
// on an unfinished plan (then checked: NewlyHolds).
var ErrDryRunSet = errors.New("plan: an unfinished plan that is not a dry run cannot become one")

// SetsDryRun reports whether a write that sets a plan stored unfinished
// (wasUnfinished) and a dry run (wasDryRun) to a dry run (dryRun) must be
// refused (DryRunSetRefused): it sets DryRun on an unfinished real plan.
func SetsDryRun(wasUnfinished, wasDryRun, dryRun bool) bool {
	return wasUnfinished && !wasDryRun && dryRun
}

// DryRunSetRefused is the error (wrapping ErrDryRunSet) of a write
// setting DryRun on plan uuid, unfinished and not a dry run.
func DryRunSetRefused(uuid string) error {
	return fmt.Errorf("plan %s: %w: its reboots may have started and a dry run would stop holding their servers; to stop it, cancel it (rebootctl plan cancel %s), and check servers with rebootctl plan create --dry-run", uuid, ErrDryRunSet, uuid)
}

// checkDryRunSet refuses (DryRunSetRefused) a write of p over stored when
// SetsDryRun says so.
func checkDryRunSet(stored, p Plan) error {
	if SetsDryRun(stored.Unfinished(), stored.DryRun, p.DryRun) {
		return DryRunSetRefused(p.UUID)
	}
	return nil
}

// sameServers refuses a write of p over stored that changes the plan's
// servers (a reboot added, removed or given another server): the servers
// of a plan do not change, whatever its state.
func sameServers(stored, p Plan) error {
	if len(p.Reboots) != len(stored.Reboots) {
		return fmt.Errorf("plan %s: %d reboots, stored %d: the servers of a plan do not change", p.UUID, len(p.Reboots), len(stored.Reboots))
	}
	for i, r := range p.Reboots {
		if stored.Reboots[i].ServerUUID != r.ServerUUID {
			return fmt.Errorf("plan %s: reboot %d is server %s, stored %s: the servers of a plan do not change", p.UUID, i, r.ServerUUID, stored.Reboots[i].ServerUUID)
		}
	}
	return nil
}

// checkHolds is CheckOthers for a write NewlyHolds says is checked: p as
// written (its servers), resumed after it ended (CheckResumed) or else
// with its DryRun cleared (DryRunClearRefused).
func checkHolds(p Plan, resumed bool, others []Plan) error {
	if resumed {
		return CheckResumed(p, others)
	}
	if err := CheckOthers(p, others); err != nil {
		return DryRunClearRefused(p.UUID, err)
	}
	return nil
}

// MayRebootOutside is the guard of the seed: while a plan is unfinished, a
// server in it may only be rebooted by that plan (planUUID equal to the
// plan's uuid). Servers in no unfinished plan (dry-run plans do not
// count) may be rebooted.
func MayRebootOutside(plans []Plan, serverUUID, planUUID string) (bool, string) {
	for _, p := range plans {
		if !p.Unfinished() || p.UUID == planUUID || p.DryRun {
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
