package remediation

import (
	"fmt"
	"maps"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Phase is the persisted progress of a phased remediation. The zero value
// PhaseNone means no remediation is under way.
type Phase int

const (
	// PhaseNone: no remediation.
	PhaseNone Phase = iota
	// PhasePowerOffRequested: the reboot annotation is (being) set; waiting
	// for the host to be observed off.
	PhasePowerOffRequested
	// PhaseNodeDeleted: the host was observed off and the Node is being
	// deleted (or tainted out-of-service).
	PhaseNodeDeleted
	// PhasePoweringOn: the reboot annotation is removed; waiting for the
	// host to be on.
	PhasePoweringOn
	// PhaseWaitingForNode: the host is on; waiting for the node to return
	// and be Ready, then restoring its labels and annotations.
	PhaseWaitingForNode
	// PhaseDone: remediated (or cancelled and the host is back on).
	PhaseDone
	// PhaseFailed: timeouts and retries ran out; the Machine was deleted if
	// it has an owner that replaces it.
	PhaseFailed
)

// String returns the phase's name.
func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return "none"
	case PhasePowerOffRequested:
		return "power-off-requested"
	case PhaseNodeDeleted:
		return "node-deleted"
	case PhasePoweringOn:
		return "powering-on"
	case PhaseWaitingForNode:
		return "waiting-for-node"
	case PhaseDone:
		return "done"
	case PhaseFailed:
		return "failed"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// NodeBackup holds what is restored on the Node that comes back.
type NodeBackup struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// State is the persisted remediation state of one Machine (store it, for
// example, as a JSON annotation on the Machine).
type State struct {
	Phase Phase
	// Attempt numbers the power cycles of this remediation, from 1.
	Attempt int
	// Started is when the current attempt started.
	Started time.Time
	// Finished is when PhaseDone or PhaseFailed was reached.
	Finished time.Time
	// Canceled is set when the needs-remediation annotation went away
	// mid-way; the remediation then only brings the host and node back.
	Canceled bool
	// Backup is the Node's metadata taken when the remediation started.
	Backup *NodeBackup
}

// Equal reports whether two states are the same.
func (s State) Equal(o State) bool {
	if s.Phase != o.Phase || s.Attempt != o.Attempt || !s.Started.Equal(o.Started) ||
		!s.Finished.Equal(o.Finished) || s.Canceled != o.Canceled || (s.Backup == nil) != (o.Backup == nil) {
		return false
	}
	return s.Backup == nil || s.Backup.Name == o.Backup.Name &&
		maps.Equal(s.Backup.Labels, o.Backup.Labels) && maps.Equal(s.Backup.Annotations, o.Backup.Annotations)
}

// Machine is what a decision needs of the Cluster API Machine.
type Machine struct {
	Name string
	UID  string
	// NeedsRemediation: NeedsRemediationAnnotation is present.
	NeedsRemediation bool
	// ControlPlane: the Machine belongs to the control plane.
	ControlPlane bool
	// HasControllerOwner: a controller (MachineSet, KCP) will replace the
	// Machine if it is deleted.
	HasControllerOwner bool
	// NodeName is the name of its Node.
	NodeName string
}

// Node is what a decision needs of the Machine's Node.
type Node struct {
	Exists      bool
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Ready       bool
	// OutOfService: the node carries OutOfServiceTaint.
	OutOfService bool
}

// Host is what a decision needs of the Machine's host.
type Host struct {
	// Power is the host's observed power state.
	Power power.State
	// RebootAnnotation: RebootAnnotation is present on the host.
	RebootAnnotation bool
}

// Observed is everything a phased decision depends on.
type Observed struct {
	Machine Machine
	Node    Node
	Host    Host
	State   State
	// MayStart is the storm guard's answer (MayStart) for this Machine; it
	// only matters when a new remediation would start.
	MayStart bool
}

// Config tunes phased decisions. The zero value is valid.
type Config struct {
	// Timeout bounds one attempt, from its start to the node being back.
	// Default 10 min.
	Timeout time.Duration
	// RetryLimit is how many more power cycles one remediation may take
	// after the first. 0 means the default, 1; a negative value, none.
	RetryLimit int
	// OutOfService taints the Node with OutOfServiceTaint (NoExecute)
	// instead of deleting it, for clusters that support non-graceful node
	// shutdown.
	OutOfService bool
	// PollInterval is how often to look again while waiting. Default 5 s.
	PollInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	switch {
	case c.RetryLimit == 0:
		c.RetryLimit = 1
	case c.RetryLimit < 0:
		c.RetryLimit = 0
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	return c
}

// Decision says what to do, in this order:
//
//  1. If UpdateState, persist State (with optimistic concurrency; on a
//     conflict stop and decide again).
//  2. AddRebootAnnotation: set RebootAnnotation=RebootValue on the host.
//  3. DeleteNode or TaintNode: only ever asked while the host is observed
//     off in this pass.
//  4. RemoveRebootAnnotation: the host may power on.
//  5. RestoreLabels, RestoreAnnotations: add them to the returned Node
//     (only keys it lacks are listed), and RemoveTaint.
//  6. RemoveNeedsRemediation: remove NeedsRemediationAnnotation.
//  7. DeleteMachine: the Machine's owner will replace it.
//  8. Look again after RequeueAfter (zero: when something changes).
type Decision struct {
	UpdateState            bool
	State                  State
	AddRebootAnnotation    bool
	RebootValue            string
	DeleteNode             bool
	TaintNode              bool
	RemoveRebootAnnotation bool
	RestoreLabels          map[string]string
	RestoreAnnotations     map[string]string
	RemoveTaint            bool
	RemoveNeedsRemediation bool
	DeleteMachine          bool
	RequeueAfter           time.Duration
	Reason                 string
}

// RebootValue returns the value of RebootAnnotation for a Machine: its UID
// (the seed) and hard mode (fencing must not wait for a soft shutdown).
func RebootValue(machineUID string) string {
	return fmt.Sprintf(`{"mode":"hard","machine":%q}`, machineUID)
}

// Decide is Config{}.Decide.
func Decide(o Observed, now time.Time) Decision { return Config{}.Decide(o, now) }

// Decide returns the phased remediation's next step for one Machine. It is
// pure: no I/O, no clock, and o is not modified.
func (c Config) Decide(o Observed, now time.Time) Decision {
	c = c.withDefaults()
	d := Decision{State: o.State}
	st := &d.State
	off := o.Host.Power == power.StateOff
	m := o.Machine
	timedOut := !st.Started.IsZero() && now.Sub(st.Started) >= c.Timeout

	switch st.Phase {
	case PhaseNone, PhaseDone, PhaseFailed:
		if o.Host.RebootAnnotation {
			// Never leave a host held off by a remediation that is over.
			d.RemoveRebootAnnotation = true
		}
		switch {
		case !m.NeedsRemediation:
			d.Reason = "healthy"
			if st.Phase == PhaseFailed {
				*st = State{Phase: PhaseNone}
				d.Reason = "needs-remediation annotation gone: failed remediation cleared"
			}
		case st.Phase == PhaseFailed:
			d.Reason = "remediation failed; waiting for the Machine to be replaced or the annotation removed"
		case !o.MayStart:
			d.Reason = "storm guard: too many unhealthy machines"
			d.RequeueAfter = c.PollInterval
		default:
			attempt := 1
			if st.Phase == PhaseDone && !st.Finished.IsZero() && now.Sub(st.Finished) < c.Timeout {
				// Unhealthy again right after a remediation: the same
				// remediation's retry, not a new one.
				attempt = st.Attempt + 1
			}
			if attempt > 1+c.RetryLimit {
				c.escalate(o, now, &d, "unhealthy again after remediation")
				break
			}
			*st = State{Phase: PhasePowerOffRequested, Attempt: attempt, Started: now, Backup: backup(o.Node)}
			d.RemoveRebootAnnotation = false
			d.AddRebootAnnotation, d.RebootValue = !o.Host.RebootAnnotation, RebootValue(m.UID)
			d.Reason = fmt.Sprintf("attempt %d: power off", attempt)
			d.RequeueAfter = c.PollInterval
		}

	case PhasePowerOffRequested:
		switch {
		case !m.NeedsRemediation:
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			*st = State{Phase: PhaseNone}
			d.Reason = "cancelled before the node was deleted: release the host"
		case timedOut:
			c.retryOrEscalate(o, now, &d, "host not off in time")
		case !o.Host.RebootAnnotation:
			d.AddRebootAnnotation, d.RebootValue = true, RebootValue(m.UID)
			d.Reason = "reboot annotation missing: add it"
			d.RequeueAfter = c.PollInterval
		case !off:
			d.Reason = "waiting for the host to be off (" + o.Host.Power.String() + ")"
			d.RequeueAfter = c.PollInterval
		default:
			st.Phase = PhaseNodeDeleted
			c.fenceNode(o, &d)
		}

	case PhaseNodeDeleted:
		fenced := !o.Node.Exists || c.OutOfService && o.Node.OutOfService
		switch {
		case !fenced && off && m.NeedsRemediation:
			c.fenceNode(o, &d)
		case !fenced && !m.NeedsRemediation:
			st.Phase, st.Canceled = PhaseWaitingForNode, true
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Reason = "cancelled: release the host"
		case !fenced:
			d.Reason = "host not off: cannot fence the node now"
			d.RequeueAfter = c.PollInterval
			if timedOut {
				c.retryOrEscalate(o, now, &d, "node not fenced in time")
			}
		default:
			st.Phase = PhasePoweringOn
			st.Canceled = st.Canceled || !m.NeedsRemediation
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Reason = "node fenced: power on"
			d.RequeueAfter = c.PollInterval
		}

	case PhasePoweringOn:
		d.RemoveRebootAnnotation = o.Host.RebootAnnotation
		switch {
		case o.Host.Power == power.StateOn:
			st.Phase = PhaseWaitingForNode
			d.Reason = "host on: wait for the node"
			d.RequeueAfter = c.PollInterval
		case timedOut:
			c.retryOrEscalate(o, now, &d, "host not on in time")
		default:
			d.Reason = "waiting for the host to be on (" + o.Host.Power.String() + ")"
			d.RequeueAfter = c.PollInterval
		}

	case PhaseWaitingForNode:
		d.RemoveRebootAnnotation = o.Host.RebootAnnotation
		if !o.Node.Exists || !o.Node.Ready {
			if timedOut {
				c.retryOrEscalate(o, now, &d, "node not back in time")
				break
			}
			d.Reason = "waiting for the node"
			d.RequeueAfter = c.PollInterval
			break
		}
		d.RestoreLabels, d.RestoreAnnotations = missing(st.Backup, o.Node)
		d.RemoveTaint = o.Node.OutOfService
		switch {
		case d.RestoreLabels != nil || d.RestoreAnnotations != nil || d.RemoveTaint:
			// Side effects first, phase later: a crash in between repeats
			// them, it never skips them.
			d.Reason = "node back: restore its labels and annotations"
			if d.RemoveTaint {
				d.Reason = "node back: remove the out-of-service taint"
				if d.RestoreLabels != nil || d.RestoreAnnotations != nil {
					d.Reason = "node back: restore its labels and annotations, remove the out-of-service taint"
				}
			}
		case m.NeedsRemediation:
			// Removed before Done is persisted: a crash in between must not
			// look like the node needing remediation again.
			d.RemoveNeedsRemediation = true
			d.Reason = "node back: remove the needs-remediation annotation"
		default:
			st.Phase, st.Finished, st.Backup = PhaseDone, now, nil
			d.Reason = "node back: done"
			if st.Canceled {
				d.Reason = "node back after cancellation: done"
			}
			return d.finish(o)
		}
		d.RequeueAfter = c.PollInterval
	}
	return d.finish(o)
}

func (d Decision) finish(o Observed) Decision {
	if d.RemoveRebootAnnotation && d.AddRebootAnnotation {
		d.RemoveRebootAnnotation = false
	}
	d.UpdateState = !d.State.Equal(o.State)
	return d
}

func (c Config) fenceNode(o Observed, d *Decision) {
	switch {
	case !o.Node.Exists:
		d.Reason = "host off; no node to delete"
	case c.OutOfService && o.Node.OutOfService:
		d.Reason = "host off; node already out of service"
	case c.OutOfService:
		d.TaintNode = true
		d.Reason = "host off: taint the node out-of-service"
	default:
		d.DeleteNode = true
		d.Reason = "host off: delete the node"
	}
	d.RequeueAfter = c.PollInterval
}

func (c Config) retryOrEscalate(o Observed, now time.Time, d *Decision, why string) {
	st := &d.State
	if st.Canceled {
		d.RemoveRebootAnnotation = o.Host.RebootAnnotation
		st.Phase, st.Finished = PhaseDone, now
		d.Reason = why + " after cancellation: give up waiting"
		return
	}
	if st.Attempt <= c.RetryLimit {
		st.Attempt++
		st.Phase, st.Started = PhasePowerOffRequested, now
		if st.Backup == nil {
			st.Backup = backup(o.Node)
		}
		d.AddRebootAnnotation, d.RebootValue = !o.Host.RebootAnnotation, RebootValue(o.Machine.UID)
		d.RemoveRebootAnnotation = false
		d.Reason = fmt.Sprintf("%s: retry, attempt %d", why, st.Attempt)
		d.RequeueAfter = c.PollInterval
		return
	}
	c.escalate(o, now, d, why)
}

func (c Config) escalate(o Observed, now time.Time, d *Decision, why string) {
	st := &d.State
	d.RemoveRebootAnnotation = o.Host.RebootAnnotation
	st.Phase, st.Finished = PhaseFailed, now
	if o.Machine.HasControllerOwner {
		d.DeleteMachine = true
		d.Reason = why + ": retries exhausted, delete the Machine for its owner to replace"
		return
	}
	d.Reason = why + ": retries exhausted, remediation failed"
}

func backup(n Node) *NodeBackup {
	if !n.Exists {
		return nil
	}
	return &NodeBackup{Name: n.Name, Labels: maps.Clone(n.Labels), Annotations: maps.Clone(n.Annotations)}
}

// missing returns the backed-up labels and annotations the node lacks;
// values already on the node win.
func missing(b *NodeBackup, n Node) (labels, annotations map[string]string) {
	if b == nil {
		return nil, nil
	}
	pick := func(from, have map[string]string) map[string]string {
		var out map[string]string
		for k, v := range from {
			if _, ok := have[k]; !ok {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
		return out
	}
	return pick(b.Labels, n.Labels), pick(b.Annotations, n.Annotations)
}
