package inventory

import (
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Job states. A job moves forward only; the ones marked (end) are final.
const (
	JobCreated     = "created"        // recorded, nothing done yet
	JobDraining    = "draining"       // the drain command runs
	JobDrained     = "drained"        // drained; the reboot is about to be asked
	JobRequesting  = "requesting"     // the reboot request is being written
	JobRebooting   = "rebooting"      // asked: off, then on again (the power cycle)
	JobWithdrawing = "withdrawing"    // cancelled before a power-off was accepted: the request is withdrawn, the server kept on
	JobSelfReboot  = "self_rebooting" // the executor's own server reboots through its operating system
	JobBooted      = "booted"         // the power cycle ended (read on); waiting for the health check
	JobUndraining  = "undraining"     // the undrain command runs; then the job ends as EndAs says
	JobDone        = "done"           // (end) power-cycled, healthy and undrained
	JobFailed      = "failed"         // (end)
	JobCancelled   = "cancelled"      // (end) stopped by a cancel or its plan; the server is on
)

// JobRecord is a reboot job as the fleet state file keeps it. Each change
// of state is written before the step it starts, so an executor restarted
// at any point resumes the job where it was, without a second reboot.
type JobRecord struct {
	UUID   string `json:"uuid"`
	Server string `json:"server"`
	// Hostname is the server's hostname when the job was created (for
	// messages about a server the inventory no longer has).
	Hostname string `json:"hostname,omitempty"`
	Plan     string `json:"plan"`
	State    string `json:"state"`
	// Cancel: the job was cancelled (CancelJob), its plan ended or no
	// longer tracks it, or it timed out; CancelReason says which. A
	// cancelled job never powers its server off unless a power-off of
	// its reboot may already have been accepted, in which case it brings
	// the server back on first.
	Cancel       bool   `json:"cancel,omitempty"`
	CancelReason string `json:"cancel_reason,omitempty"`
	// Key is the job's own reboot annotation key (one per job).
	Key string `json:"key,omitempty"`
	// RequestValue and RequestAt are the reboot annotation value and its
	// time, chosen before it is written (JobRequesting), so that writing
	// it again after a crash is the same request.
	RequestValue string    `json:"request_value,omitempty"`
	RequestAt    time.Time `json:"request_at,omitzero"`
	// BootID is the executor's server's boot ID before its reboot
	// (JobSelfReboot): a different one afterwards is the new boot.
	BootID string `json:"boot_id,omitempty"`
	// RebootSentBoot is the boot ID on which the reboot command was run
	// (recorded before it runs: it runs once per boot), RebootSentAt
	// when, and RebootError its error if it failed.
	RebootSentBoot string     `json:"reboot_sent_boot,omitempty"`
	RebootSentAt   *time.Time `json:"reboot_sent_at,omitempty"`
	RebootError    string     `json:"reboot_error,omitempty"`
	// EndAs is the state JobUndraining ends in.
	EndAs     string     `json:"end_as,omitempty"`
	Created   time.Time  `json:"created"`
	Started   *time.Time `json:"started,omitempty"`
	Drained   *time.Time `json:"drained,omitempty"`
	Requested *time.Time `json:"requested,omitempty"`
	// Finished is the end of the power cycle: the server read on again
	// (not the time the reboot was asked).
	Finished *time.Time `json:"finished,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	// PoweredOff is when the job first saw its server fenced off, and
	// Healthy when its health check first passed after the power cycle:
	// with Drained and Finished, the phases its plan's report draws
	// (plan.Phases).
	PoweredOff *time.Time `json:"powered_off,omitempty"`
	Healthy    *time.Time `json:"healthy,omitempty"`
	StateAt    time.Time  `json:"state_at,omitzero"`
	Error      string     `json:"error,omitempty"`
}

// Over reports whether the job is over (done, failed or cancelled).
func (j JobRecord) Over() bool {
	return j.State == JobDone || j.State == JobFailed || j.State == JobCancelled
}

// key is the job's annotation key (records written before per-job keys
// used the shared one).
func (j JobRecord) key() string {
	if j.Key != "" {
		return j.Key
	}
	return "rebootctl"
}

// jobKey is the annotation key of job id: its own, so that no job can
// take over or remove another's request.
func jobKey(id string) string { return "rebootctl-" + id }

// jobAct is what the applier does after persisting a job decision.
type jobAct int

const (
	actNone         jobAct = iota
	actDrain               // run the drain command
	actUndrain             // run the undrain command
	actRequest             // write the job's reboot request on the host record
	actRelease             // remove the request: the server is fenced, let it be powered on
	actWithdraw            // remove the request and drop the pending reboot (no power-off was accepted)
	actSelfReboot          // run the executor's server's reboot command
	actWithdrawSelf        // remove the request and drop the pending reboot of the executor's own server
)

func (a jobAct) String() string {
	return [...]string{"none", "drain", "undrain", "request", "release", "withdraw", "self-reboot", "withdraw-self"}[a]
}

// jobInput is everything a job decision depends on.
type jobInput struct {
	Job  JobRecord
	Host hostRecord
	// Self: the job's server runs this executor; BootID is its boot ID
	// now ("" if unknown). OthersBusy: another server's power cycle of
	// this fleet has not ended (a live job in a power step, or its power
	// bookkeeping unsettled): the executor's own reboot waits for it (self
	// last, alone).
	Self       bool
	BootID     string
	OthersBusy bool
	// MaybeSelf: the job's server may be the machine this executor runs
	// on, and the executor cannot tell (Options.MaybeSelf).
	MaybeSelf bool
	// SelfCutOff (Self only): the cut-off of the server's reboot
	// command has passed (Fleet.offHorizon: ShutdownMax after the
	// command returned, or after this process started): a reboot it
	// started can no longer land.
	SelfCutOff bool
	HasReboot  bool // the server has a reboot command
	// Healthy is the server's health check, run for JobBooted only.
	Healthy bool
	// JobTimeout and ServicesTimeout: see Options.
	JobTimeout, ServicesTimeout time.Duration
	// Fenced: the job's request is present and the reboot package holds
	// evidence that the server was off after it (reboot.FencedFor).
	Fenced bool
}

// jobStep is a job decision: persist Job (if Changed), then do Act; if
// the act succeeds, persist AfterOK (if set); if it fails and FailOnErr is
// set, the job fails with FailOnErr and the error (through JobUndraining,
// unless the undrain itself failed: every end undoes the drain), else the act is
// retried at the next step.
type jobStep struct {
	Job       JobRecord
	Changed   bool
	Act       jobAct
	AfterOK   *JobRecord
	FailOnErr string
	// RecordErr: if the act fails, its error (prefixed) is written into
	// the job's RebootError; the act is not retried. (actSelfReboot only:
	// whatever its outcome, RebootSentAt is then stamped again with the
	// time the command returned or was killed.)
	RecordErr string
}

// selfRebootGrace: how long after a failed reboot command of the
// executor's own server its job fails (the command may fail because the
// shutdown it started killed it).
// The job's end does not end the reboot: the fleet counts the server down,
// and powers nothing else off, until its new boot is seen or ShutdownMax
// after the command (hostRecord.SelfRebootBoot).
const selfRebootGrace = 2 * time.Minute

// selfRebootMayLand is what a failed self-reboot job adds: the command
// may have been accepted all the same.
const selfRebootMayLand = "it may still have been accepted: the server counts as offline, and nothing else is powered off, " +
	"until its new boot is seen or --shutdown-max after the command"

// sinceNow returns j with every stamp its timeouts count from that lies
// after now (the wall clock stepped back since it was written) set to
// now, and whether it changed one: a timeout then runs out at most its
// length after the step back, not once the clock has caught up with what
// it lost (a year ahead and back kept the executor's own server drained
// for a year: issue 38, C). The request's own instant (RequestAt, part of
// its value) is never changed. j is not modified.
func sinceNow(j JobRecord, now time.Time) (JobRecord, bool) {
	changed := false
	at := func(t *time.Time) *time.Time {
		if t == nil || !t.After(now) {
			return t
		}
		changed = true
		n := now
		return &n
	}
	j.Requested, j.RebootSentAt, j.Finished = at(j.Requested), at(j.RebootSentAt), at(j.Finished)
	if j.Created.After(now) {
		j.Created, changed = now, true
	}
	if j.StateAt.After(now) {
		j.StateAt, changed = now, true
	}
	return j, changed
}

// decideJob is the job's state machine: a pure function of what was
// observed and the time (no I/O, no clock, inputs unchanged).
func decideJob(in jobInput, now time.Time) jobStep {
	j, rebased := sinceNow(in.Job, now)
	h := in.Host
	st := jobStep{Job: j, Changed: rebased}
	move := func(state string) {
		st.Job.State, st.Job.StateAt, st.Changed = state, now, true
	}
	end := func(state, msg string) {
		move(state)
		if msg != "" {
			st.Job.Error = msg
		}
		t := now
		st.Job.Ended = &t
	}
	undrainThen := func(endAs, msg string) {
		move(JobUndraining)
		st.Job.EndAs = endAs
		if msg != "" {
			st.Job.Error = msg
		}
	}
	cancelMsg := func(what string) string {
		msg := what
		if j.CancelReason != "" {
			msg += " (" + j.CancelReason + ")"
		}
		if h.LastError.Message != "" && h.LastError.Job == j.UUID {
			msg += "; last BMC error: " + h.LastError.Text()
		}
		return msg
	}
	tp := func(t time.Time) *time.Time { return &t }
	v, anyOurs := h.Annotations[reboot.AnnotationPrefix+j.key()]
	present := anyOurs && v == j.RequestValue && j.RequestValue != ""
	// offMaybe: a power-off of this job's own reboot may have been
	// accepted (the host's flag belongs to the request that set it).
	offMaybe := h.OffMaybe && h.Job == j.UUID
	maybeSelfMsg := "this server may be the machine this executor runs on (not told apart by hostname or address): never powered off through its BMC; " +
		"restart the executor with --self naming it, or --self none"
	if in.MaybeSelf && !in.Self && !offMaybe && !j.Cancel && (j.State == JobRequesting || j.State == JobRebooting) {
		// It may be this machine, and no power-off of this reboot may
		// have been accepted: nothing will ever power it off through its
		// BMC, so the request is withdrawn at once (the cancel path). Not
		// as for Self: it may well be another server, and one whose
		// power-off may have been accepted keeps its power cycle (below;
		// the fleet only powers it on, gated.Off refusing every
		// power-off).
		st.Job.Cancel, st.Job.CancelReason, st.Changed = true, maybeSelfMsg, true
		return st
	}
	if in.Self && (j.State == JobRequesting || j.State == JobRebooting || j.State == JobWithdrawing) {
		// This reboot began through the BMC before the executor knew it
		// runs on this server (another hostname, --self given after a
		// restart): before anything else, take the request back and
		// drop the pending reboot (the executor runs, so the server is
		// on), then reboot through the OS as the executor's own.
		st.Act = actWithdrawSelf
		after := j
		after.State, after.StateAt = JobDrained, now
		st.AfterOK = &after
		return st
	}
	if in.MaybeSelf && (j.State == JobCreated || j.State == JobDraining || j.State == JobDrained) {
		msg := maybeSelfMsg
		if j.State == JobCreated {
			end(JobFailed, msg)
		} else {
			undrainThen(JobFailed, msg)
		}
		return st
	}
	if h.Abandoned != "" && j.State == JobCreated {
		end(JobFailed, "abandoned by the operator ("+h.Abandoned+")")
		return st
	}
	if h.Abandoned != "" && j.State != JobUndraining {
		// The operator gave up on the server: nothing powers it any
		// more; the job undoes its drain and ends.
		undrainThen(JobFailed, "abandoned by the operator ("+h.Abandoned+"); last known power: "+orUnknown(h.Phase))
		return st
	}
	switch j.State {
	case JobCreated:
		if j.Cancel {
			end(JobCancelled, cancelMsg("cancelled before it started"))
			break
		}
		if in.Self && !in.HasReboot {
			end(JobFailed, "this executor runs on this server and never powers it off through its BMC (nothing would power it on again); "+
				"give the server a reboot command in the inventory (reboot: [systemctl, reboot]), or run the executor on another machine")
			break
		}
		move(JobDraining)
		st.Job.Started = tp(now)
	case JobDraining:
		if j.Cancel {
			undrainThen(JobCancelled, cancelMsg("cancelled while draining"))
			break
		}
		st.Act = actDrain
		after := j
		after.State, after.StateAt, after.Drained = JobDrained, now, tp(now)
		st.AfterOK, st.FailOnErr = &after, "drain: "
	case JobDrained:
		switch {
		case j.Cancel:
			undrainThen(JobCancelled, cancelMsg("cancelled after the drain, before the reboot"))
		case in.Self && !in.HasReboot:
			undrainThen(JobFailed, "this executor runs on this server and never powers it off through its BMC (nothing would power it on again); "+
				"give the server a reboot command in the inventory (reboot: [systemctl, reboot]), or run the executor on another machine")
		case in.Self && in.OthersBusy:
			// Self last, alone: never reboot while servers this fleet
			// powered off wait for the executor to power them on.
		case in.Self:
			if in.BootID == "" {
				undrainThen(JobFailed, "this executor runs on the server and cannot read its boot ID, so it cannot tell its reboot happened")
				break
			}
			move(JobSelfReboot)
			st.Job.BootID = in.BootID
			st.Job.Requested = tp(now)
		default:
			// Choose the request before writing it: writing it again
			// after a crash is then the same request, not a second one.
			move(JobRequesting)
			st.Job.Key = jobKey(j.UUID)
			st.Job.RequestAt, st.Job.RequestValue = now, reboot.RequestValue(power.ModeSoft, now)
		}
	case JobRequesting:
		if j.Cancel {
			move(JobWithdrawing) // the request may have been written before a crash
			st.Job.Error = cancelMsg("cancelled before the power-off")
			break
		}
		st.Act = actRequest
		after := j
		after.State, after.StateAt, after.Requested = JobRebooting, now, tp(now)
		st.AfterOK = &after
	case JobRebooting:
		// In this state the request is removed only by the release, after
		// the reboot package fenced the server for it: gone, no reboot
		// pending, and the server read on since is the end of the power
		// cycle. (No timestamps compared: the wall clock may have been
		// stepped between the request and the power-on.)
		cycled := !anyOurs && !h.Status.Pending() && h.Settled && h.Job == j.UUID
		switch {
		case cycled:
			st.Job.Finished = tp(now)
			if j.Cancel {
				undrainThen(JobCancelled, cancelMsg("cancelled after its power-off was accepted: powered on again, health not checked"))
				break
			}
			move(JobBooted)
		case present && in.Fenced:
			st.Act = actRelease // off, on evidence: let it be powered on
			if j.PoweredOff == nil {
				st.Job.PoweredOff, st.Changed = tp(now), true
			}
		case offMaybe && in.JobTimeout > 0 && j.Requested != nil && now.Sub(*j.Requested) >= in.JobTimeout:
			// A power-off may have been accepted, and the power cycle has
			// not completed within the job timeout (a BMC that stopped
			// answering): the job ends, so that its plan does not wait for
			// it for ever; the fleet keeps reconciling the server (it
			// powers it on once its BMC answers) and shows its phase. The
			// request is released first, so that nothing holds the server
			// off for a job that has ended.
			st.Act = actRelease
			after := j
			after.State, after.StateAt, after.EndAs = JobUndraining, now, JobFailed
			after.Error = cancelMsg("the power cycle did not complete within " + in.JobTimeout.String() +
				" of the request; the server may be off: the executor keeps trying to power it on")
			st.AfterOK = &after
		case j.Cancel && !offMaybe:
			move(JobWithdrawing)
			st.Job.Error = cancelMsg("cancelled before the power-off")
		case !j.Cancel && !offMaybe && in.JobTimeout > 0 && now.Sub(j.Created) >= in.JobTimeout:
			st.Job.Cancel, st.Changed = true, true
			st.Job.CancelReason = "the power-off was not accepted within " + in.JobTimeout.String()
		}
	case JobWithdrawing:
		switch {
		case offMaybe:
			// A power-off may have been accepted meanwhile: the cycle
			// completes (the server is brought back on), then the job ends.
			move(JobRebooting)
		case anyOurs || h.Status.Pending() && h.Job == j.UUID:
			st.Act = actWithdraw
		case h.Settled || !h.Watch && !h.Status.Pending():
			undrainThen(JobCancelled, "")
		}
	case JobSelfReboot:
		if in.BootID != "" && in.BootID != j.BootID {
			st.Job.Finished = tp(now)
			move(JobBooted)
			break
		}
		if j.RebootSentBoot == j.BootID {
			// Sent once on this boot (recorded before it ran): wait for
			// the new boot, never run it again (a re-run during the
			// shutdown could fail a reboot that works, or push back a
			// delayed one). A failed boot-ID read waits too.
			switch {
			case j.RebootError != "" && in.BootID == j.BootID && j.RebootSentAt != nil && now.Sub(*j.RebootSentAt) >= selfRebootGrace:
				// Still the same boot, readably, well after the command
				// failed (counted from when it returned or was killed):
				// it really failed.
				undrainThen(JobFailed, "reboot command failed and this executor's server did not reboot within "+selfRebootGrace.String()+": "+j.RebootError+
					"; "+selfRebootMayLand)
			case in.Self && in.BootID == j.BootID && in.SelfCutOff:
				// Still the same boot, readably, past the cut-off (the
				// command ran and did not reboot within --shutdown-max,
				// or the executor was killed before running it and
				// restarted on this boot): no reboot of it can land any
				// more; the job ends, and nothing of it holds the other
				// servers' power-offs.
				undrainThen(JobFailed, "this executor's server did not reboot within --shutdown-max of its reboot command (or the executor was stopped before running it): "+
					"the command evidently did not reboot it; check the command (reboot: in the inventory) and start a new plan for it")
			case in.JobTimeout > 0 && j.Requested != nil && now.Sub(*j.Requested) >= in.JobTimeout:
				undrainThen(JobFailed, "this executor's server did not boot again within "+in.JobTimeout.String()+" of its reboot command; "+selfRebootMayLand)
			}
			break
		}
		if j.Cancel {
			// Cancelled (its plan cancelled, CancelJob, abandoned) before
			// the command was sent: it is never run.
			undrainThen(JobCancelled, cancelMsg("cancelled before its reboot command was sent"))
			break
		}
		if !in.Self {
			// The executor no longer runs on this server (restarted on
			// another machine, --self changed): its reboot command is a
			// local one and would reboot the machine the executor runs
			// on now. Never run; the job undoes its drain and fails.
			undrainThen(JobFailed, "the executor no longer runs on "+orServer(j)+": its reboot command (a local one) is not run on another machine; "+
				"reboot "+orServer(j)+" by hand, or run the executor on it (--self naming it) and start a new plan for it")
			break
		}
		// Record "sent on this boot" before running it.
		st.Job.RebootSentBoot, st.Job.RebootSentAt, st.Changed = j.BootID, tp(now), true
		st.Act = actSelfReboot
		st.RecordErr = "reboot command: "
	case JobBooted:
		switch {
		case j.Cancel:
			undrainThen(JobCancelled, cancelMsg("cancelled after its power cycle: server on, health not checked"))
		case in.Healthy:
			st.Job.Healthy = tp(now)
			undrainThen(JobDone, "")
		case j.Finished != nil && in.ServicesTimeout > 0 && now.Sub(*j.Finished) >= in.ServicesTimeout:
			undrainThen(JobFailed, "health check not passing within "+in.ServicesTimeout.String()+" of the power cycle")
		}
	case JobUndraining:
		st.Act = actUndrain
		after := j
		endAs := j.EndAs
		if endAs == "" {
			endAs = JobDone
		}
		after.State, after.StateAt = endAs, now
		after.Ended = tp(now)
		st.AfterOK = &after
		if in.ServicesTimeout > 0 && !j.StateAt.IsZero() && now.Sub(j.StateAt) >= in.ServicesTimeout {
			st.FailOnErr = "undrain failed, the server is left drained (run its undrain command by hand): "
		}
	}
	return st
}

func orUnknown(phase string) string {
	if phase == "" {
		return "unknown (never read)"
	}
	return phase
}

// orServer is the job's server as operators name it: its hostname when
// the job was created, else its UUID.
func orServer(j JobRecord) string {
	if j.Hostname != "" {
		return j.Hostname
	}
	return j.Server
}
