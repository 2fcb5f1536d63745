package remediation

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	// PhaseDone: remediated (or cancelled and the host is back on, or
	// given up waiting for it).
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
// example, as a JSON annotation on the Machine). The zero value is a
// healthy machine that was never remediated.
type State struct {
	Phase Phase
	// Attempt numbers the power cycles of the current remediation, from 1.
	// A machine found unhealthy again less than Config.MinHealthyPeriod
	// after its last remediation finished is a retry of that remediation:
	// Attempt goes on counting, whatever waits (storm guard, RetryPeriod)
	// came in between.
	Attempt int
	// Started is when the current attempt started (its timeout runs from
	// here).
	Started time.Time
	// RequestedAt is the T of the attempt's current reboot request: the
	// Node is fenced only on evidence that the hardware was off at or after
	// it, while that request has held the host off. A request that went
	// missing mid-attempt is written again as a new request with a new T,
	// never with the old value: the host may have been powered on between.
	RequestedAt time.Time
	// Host is the host the attempt's current reboot request was written
	// to (persisted before it is written): the request is read, and
	// removed, there, whatever HostOf answers later, in every phase (also
	// after the remediation ended, until its removal is confirmed). A Machine whose host
	// changes mid-attempt (Host.Name differs) has this host's request
	// removed first, then, once this host is no longer off for it (not
	// held, and, when it was powered off after the request, read On
	// since: Host.Power), and no host it moved from may be off for a
	// request of its found there (PrevHost, EarlierHosts), a new request
	// written to its new host: never two held at once (at the attempt's
	// timeout it fails instead).
	// Empty in states persisted before it existed, or
	// when the HostStore does not name hosts (Host.Name): then the
	// HostStore resolves the host on every call.
	Host string
	// PrevHost is the host the request was written to before the last
	// move (Host's value then): while it is set, every pass reads it and
	// removes a value of this Machine's found there (Observed.PrevHostRequest,
	// Decision.RemovePrevRequest), so that a request a paused writer
	// without a Guard lands there after the move is removed whenever it
	// lands; it is forgotten only once a pass of a remediation that is
	// over finds none there and the host not off for one it found there
	// (Observed.PrevHostOff; the admission is kept meanwhile) (a new
	// attempt, or a retry, keeps it; a second move keeps it in
	// EarlierHosts while it may be off for such a request). Empty if the
	// Machine never moved.
	PrevHost string
	// PrevHostSince is when the Machine moved away from PrevHost (the
	// move waited for that host to be on): a power-off of PrevHost after
	// it may be for a request of the Machine's that landed there since.
	// Zero in states persisted before it existed (or rewritten by a
	// controller of that version): the first pass sets it to the last
	// request's time (RequestedAt, else Started), and PrevHostSeen to it
	// too if unset (whether a request was found there is unknown: taken
	// as found, so PrevHost is counted while it may be off).
	PrevHostSince time.Time
	// PrevHostSeen is when a pass first found a request of this Machine's
	// on PrevHost (since PrevHostSince; persisted before that request is
	// removed): only then may PrevHost be off for a request of the
	// Machine's (Observed.PrevHostOff), and not for another Machine's
	// that re-used the host. Zero (with PrevHostSince set): none found,
	// or the one found was served (a pass found PrevHost not off for it
	// since).
	PrevHostSeen time.Time
	// EarlierHosts are hosts the Machine moved from before PrevHost (a
	// second move) where a request of its was found and that may still be
	// off for it: each is read on every pass, as PrevHost is, and
	// forgotten once it is not off for that request (Observed.EarlierHosts;
	// the admission is kept meanwhile). Nil if none.
	EarlierHosts []MovedFrom
	// StraySeen is when a pass of a remediation that is over (done,
	// failed, or none: a failed one cleared, or never remediated) first
	// found a request of this Machine's (a value naming its UID) on Host,
	// or the T that request's value carries (Host.RequestT) if earlier
	// (a value with no T, or one ahead of the pass's clock: the last
	// known boundary, Finished, RequestedAt or Started, else
	// knownEarliest; never the pass's clock),
	// its own host (with Host empty, the host HostOf names, set as Host;
	// a paused writer's stale request, landed after the end; persisted
	// before that request is removed): while Host may be off
	// for it (offFor, read for the last request) the remediation keeps
	// its admission, and is admitted again if it was released (the host
	// is off already: the storm guard can only count it); a new attempt
	// of its then waits for the storm guard as one not admitted does.
	// Zero once a pass finds the host not off for it.
	StraySeen time.Time
	// Finished is when the last attempt reached done or failed.
	Finished time.Time
	// UnhealthyAgain is when the machine was first seen unhealthy again
	// after Finished; it decides retry or new remediation.
	UnhealthyAgain time.Time
	// Canceled is set when the needs-remediation annotation went away
	// mid-way; the remediation then only brings the host and node back.
	Canceled bool
	// CanceledAt is when it was cancelled: the attempt's timeout for
	// bringing the host and node back runs from here, not from Started
	// (a cancel late in an attempt still gets the whole timeout). Zero
	// in states persisted before it existed: then from Started.
	CanceledAt time.Time
	// Backup is the Node's metadata taken when the remediation started,
	// kept until it is restored on the Node that comes back (also after the
	// remediation ended).
	Backup *NodeBackup
	// Tainted records that this remediation put the out-of-service taint on
	// the Node, so that only its own taint is removed.
	Tainted bool
	// Message says, for people (a condition or event on the Machine), why
	// the remediation waits or what it could not clean up.
	Message string
}

// Equal reports whether two states are the same.
func (s State) Equal(o State) bool {
	if s.Phase != o.Phase || s.Attempt != o.Attempt || !s.Started.Equal(o.Started) || !s.RequestedAt.Equal(o.RequestedAt) || s.Host != o.Host || s.PrevHost != o.PrevHost ||
		!s.Finished.Equal(o.Finished) || !s.UnhealthyAgain.Equal(o.UnhealthyAgain) || s.Canceled != o.Canceled || !s.CanceledAt.Equal(o.CanceledAt) ||
		s.Tainted != o.Tainted || s.Message != o.Message || (s.Backup == nil) != (o.Backup == nil) ||
		!s.PrevHostSince.Equal(o.PrevHostSince) || !s.PrevHostSeen.Equal(o.PrevHostSeen) || !slices.EqualFunc(s.EarlierHosts, o.EarlierHosts, MovedFrom.Equal) ||
		!s.StraySeen.Equal(o.StraySeen) {
		return false
	}
	return s.Backup == nil || s.Backup.Name == o.Backup.Name &&
		maps.Equal(s.Backup.Labels, o.Backup.Labels) && maps.Equal(s.Backup.Annotations, o.Backup.Annotations)
}

// MovedFrom is a host a Machine moved away from that is still read for a
// request of the Machine's landing there (State.PrevHost, with
// State.PrevHostSince and State.PrevHostSeen; State.EarlierHosts).
type MovedFrom struct {
	// Host names the host.
	Host string
	// Since: the Machine moved away from it then; a power-off after it
	// may be for a request of the Machine's that landed there since.
	Since time.Time
	// Seen: when a pass found a request of the Machine's there (zero:
	// none found, or served since).
	Seen time.Time
}

// Equal reports whether two entries are the same.
func (m MovedFrom) Equal(o MovedFrom) bool {
	return m.Host == o.Host && m.Since.Equal(o.Since) && m.Seen.Equal(o.Seen)
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
	// Cluster and HealthCheck scope the storm guard (FleetMachine).
	Cluster, HealthCheck string
}

// Node is what a decision needs of the Machine's Node.
type Node struct {
	Exists bool
	Name   string
	// UID identifies this registration of the Node: a Node deleted and
	// registered again under the same name has another UID. The Node is
	// deleted only with the UID observed (NodeStore.Delete).
	UID         string
	Labels      map[string]string
	Annotations map[string]string
	Ready       bool
	// OutOfService: the node carries OutOfServiceTaint.
	OutOfService bool
}

// Host is what a decision needs of the Machine's host, as the reboot
// protocol answers it (see RebootAPIHosts) for the current attempt's request.
type Host struct {
	// Missing: the Machine has no host (its BareMetalHost was deleted or
	// released mid-remediation). Nothing can be powered; the attempt waits
	// for it until its timeout, then escalates. It says nothing of the
	// host the request was written to (Request.Host), whose fields below
	// are still read there and judge whether it is held (Held).
	Missing bool
	// Name is the host the Machine maps to now ("" if Missing, or if the
	// HostStore does not say; the Reconciler ignores it unless its
	// HostStore is a RequestRemover). The other fields answer for the
	// request's host (Request.Host) when it is set, which may differ after
	// a move.
	Name string
	// RebootAnnotation: RebootAnnotation is present on the request's host
	// with a value of this Machine's (one naming the UID that
	// Request.Value names, of any attempt: RebootValue); with any value
	// when the request has none. Another Machine's request on a host
	// this one used to map to is not this Machine's to remove.
	RebootAnnotation bool
	// Requested: it is present with the current attempt's value
	// (Request.Value).
	Requested bool
	// RequestT is the T the request of this Machine's found on the host
	// (RebootAnnotation) carries in its value (RebootValue's attempt
	// time); zero if none is found or its value carries none. A
	// remediation that is over reads the host for a stray request of its
	// from no later than this T (State.StraySeen).
	RequestT time.Time
	// Fenced: the reboot controller holds evidence that the hardware was
	// off at or after the attempt's start, for this very request
	// (reboot.FencedFor). The Node is deleted or tainted only on it: never
	// on a power reading, which a BMC may echo from before a reset.
	Fenced bool
	// PoweredOn: the reboot controller powered the host on after the
	// attempt's start and no reboot is pending (reboot.Client.Done), and,
	// where the store can read the power (RebootAPIHosts.Power), the host
	// reads On past its stale-read window since (reboot.Client.Up); where
	// it cannot, the controller confirmed that power-on by such a reading
	// (ConfirmedOn). Never on the record of the power-on alone.
	PoweredOn bool
	// ConfirmedOn: the reboot controller confirmed its power-on after the
	// request by an On reading that cannot be an echo
	// (reboot.Status.OnConfirmed): the host was on after the request's
	// power-off. A move (moveBlocked) takes it as an On reading.
	ConfirmedOn bool
	// OnConfirmedAt: the reboot controller's last power-on of the host,
	// when it confirmed it by an On reading that cannot be an echo
	// (reboot.Status.OnConfirmed equal to LastPoweredOn), no power-off
	// was recorded after it and no reboot is pending; zero otherwise, or
	// where the store cannot tell (it need not set it). Whatever request
	// it is read for: every reboot the controller ended, for any request
	// it saw, ended at or before it, and the host was on after it. A host
	// a gone Machine moved from, read for a request whose time is not
	// recorded (Member.movedFrom), is read from it rather than from any
	// time (readMembersPrev).
	OnConfirmedAt time.Time
	// OffAfterRequest: the reboot controller recorded the hardware off
	// after the request (Status.LastPoweredOff after Request.At); with
	// PoweredOn false, the host may still be off and the controller may
	// still power it on: it is not let go.
	OffAfterRequest bool
	// RebootPending: the reboot controller has a reboot pending on the
	// host (reboot.Status.Pending) while a request of the attempt was made:
	// it goes on to power the host off and on whether or not a request is
	// left, so the host is not let go either.
	RebootPending bool
	// Offline: the request's host is kept off by its owner, not by the
	// request: its Online (a BareMetalHost's spec.online) is false, its
	// owner released it (deprovisioned or unprovisioned: Online false
	// alone may be a blip its owner takes back) and no request of this
	// Machine's is on it (RebootAnnotation false). Whoever
	// serves reboot requests keeps such a host off and never powers it on
	// for the request, so PoweredOn would never come: OffAfterRequest no
	// longer holds it for the remediation (Held); RebootPending still
	// does (the reboot controller keeps a pending reboot while Online is
	// false and powers the host on for it once Online is true again;
	// RebootAPIHosts also reports a power-on it recorded that no On
	// reading confirms as RebootPending). A
	// Machine's ordinary end (its owner releases the host, which is then
	// deprovisioned and kept off) thus releases its admission. Set only
	// by a store that knows the owner's wish (kube.OperatorHosts;
	// RebootAPIHosts with OwnerOnline).
	Offline bool
	// UpReadFrom: when PoweredOn is false only because the On reading may
	// still echo the state from before the power-on, the time from which
	// a reading counts (reboot.UpReadFrom); zero otherwise.
	UpReadFrom time.Time
	// Power is the power state as read, for Table mode and messages only.
	Power power.State
}

// Request identifies the current attempt's reboot request, for
// HostStore.Get: the annotation value, the T it was made at, and the host
// it was written to (State.Host; "" to ask the HostStore's mapping). Out
// of flight it is the last attempt's, which may still be on its host
// until its removal is confirmed.
type Request struct {
	Value string
	At    time.Time
	Host  string
}

// RequestFor returns the reboot request of the current attempt of s for a
// Machine. Out of flight (none, done, failed) it is the last attempt's,
// on State.Host, which is read and removed there until the removal is
// confirmed, whatever the Machine maps to now; with no attempt at all, a
// Request whose Value only names the Machine (its UID, no T: Host.Fenced
// and Host.PoweredOn never answer for it), so that only this Machine's
// requests count as its own (Host.RebootAnnotation; a Machine without a
// UID: any request, Value empty).
func RequestFor(m Machine, s State) Request {
	at := s.RequestedAt
	if at.IsZero() {
		at = s.Started
	}
	if InFlight(s.Phase) && !at.IsZero() {
		return Request{Value: RebootValue(m.UID, at), At: at, Host: s.Host}
	}
	switch {
	case m.UID == "":
		return Request{Host: s.Host}
	case at.IsZero():
		return Request{Value: RebootValue(m.UID, time.Time{}), Host: s.Host}
	}
	return Request{Value: RebootValue(m.UID, at), At: at, Host: s.Host}
}

// Observed is everything a phased decision depends on.
type Observed struct {
	Machine Machine
	Node    Node
	Host    Host
	State   State
	// Admitted: the Machine is in the shared admission record (see
	// AdmissionStore): a remediation was admitted for it and not released.
	Admitted bool
	// MayStart and GuardReason are the storm guard's answer (MayStart) for
	// this Machine; they only matter when a new remediation would start.
	MayStart    bool
	GuardReason string
	// PrevHostRequest: a request of this Machine's (any attempt's) is on
	// State.PrevHost, read by the Reconciler on every pass while it is
	// set (a paused writer's request that landed after the move).
	PrevHostRequest bool
	// PrevHostOff: State.PrevHost may still be off for a request of this
	// Machine's that a pass found there (State.PrevHostSeen set; never
	// for a power-off another Machine's request made): offFor, read for
	// State.PrevHostSince (held, or powered off after it and not read
	// On, nor confirmed on by the reboot controller, since), or a
	// request of this Machine's is on it now (PrevHostRequest: the
	// reboot controller may power it off for it before the pass removes
	// it). State.PrevHost, and the admission, are kept while it is.
	PrevHostOff bool
	// EarlierHosts are State.EarlierHosts as read, in the same order
	// (Request and Off as PrevHostRequest and PrevHostOff).
	EarlierHosts []PrevReading
}

// PrevReading is what a pass read of a host the Machine moved from
// (Observed.EarlierHosts).
type PrevReading struct {
	// Request: a request of this Machine's is on it.
	Request bool
	// Off: it may still be off for a request of this Machine's found
	// there (MovedFrom.Seen set), or one is on it now (Request).
	Off bool
}

// Config tunes phased decisions. The zero value is valid.
type Config struct {
	// Timeout bounds one attempt, from its start to the node being back.
	// Default 10 min.
	Timeout time.Duration
	// RetryLimit is how many more power cycles one remediation may take
	// after the first. 0 means the default, 1; a negative value, none.
	RetryLimit int
	// MinHealthyPeriod: a machine found unhealthy again less than this
	// after its last remediation finished counts as a retry of the same
	// remediation (Cluster API KubeadmControlPlane's minHealthyPeriod).
	// Default 1 h. So a health checker that re-adds its annotation right
	// after success (a stale view) costs at most RetryLimit+1 power cycles
	// before escalation.
	MinHealthyPeriod time.Duration
	// RetryPeriod is the least time between the end of one attempt and
	// the start of a retry (KubeadmControlPlane's retryPeriod). Default 0.
	RetryPeriod time.Duration
	// OutOfService taints the Node with OutOfServiceTaint (NoExecute)
	// instead of deleting it, for clusters that support non-graceful node
	// shutdown.
	OutOfService bool
	// PollInterval is how often to look again while waiting. Default 5 s.
	PollInterval time.Duration
	// Nouns, if set, are the words State.Message and Decision.Reason use
	// instead of Cluster API's (machine, node, cluster, health check,
	// needs-remediation annotation).
	Nouns Nouns
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
	if c.MinHealthyPeriod <= 0 {
		c.MinHealthyPeriod = time.Hour
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	return c
}

// Decision says what to do, in this order:
//
//  1. If Admit, add the Machine to the shared admission record with a
//     compare-and-swap write (on a conflict stop and decide again); the
//     Reconciler records there too the request AddRebootAnnotation is
//     about to write (Admissions.Requests), in the same write.
//  2. If UpdateState, persist State (with optimistic concurrency; on a
//     conflict stop and decide again).
//  3. AddRebootAnnotation: set RebootAnnotation=RebootValue on the host
//     (through reboot.Client.RequestWith, T = State.Started).
//  4. DeleteNode (with the observed Node's UID as a precondition) or
//     TaintNode: only ever asked on Host.Fenced.
//  5. RemoveRebootAnnotation: the host may power on; RemovePrevRequest,
//     RemoveEarlierRequests: remove a request of the Machine's from
//     State.PrevHost, and from those hosts of State.EarlierHosts.
//  6. RestoreLabels, RestoreAnnotations: add them to the Node named
//     RestoreNode (only keys it lacks are listed), and RemoveTaint.
//  7. RemoveNeedsRemediation: remove NeedsRemediationAnnotation.
//  8. DeleteMachine: the Machine's owner will replace it.
//  9. If Release, remove the Machine from the admission record.
//  10. Look again after RequeueAfter (zero: when something changes).
//
// Admit and Release are about the storm guard's shared admission record
// (AdmissionStore, Config's Limit), not about the host or the Machine:
// Admit adds this Machine to the record, Release removes it (the
// remediation is over, whatever its outcome, so another may start).
type Decision struct {
	// Admit: add the Machine to the admission record (step 1): a new
	// remediation the storm guard admitted (Observed.MayStart), or one
	// that is over whose own host is off for a stale request of its found
	// there (State.StraySeen: the host is off already, so it is counted
	// whatever the limit).
	Admit                  bool
	UpdateState            bool
	State                  State
	AddRebootAnnotation    bool
	RebootValue            string
	DeleteNode             bool
	TaintNode              bool
	RemoveRebootAnnotation bool
	RestoreNode            string
	RestoreLabels          map[string]string
	RestoreAnnotations     map[string]string
	RemoveTaint            bool
	RemoveNeedsRemediation bool
	DeleteMachine          bool
	// RemovePrevRequest: remove a request of this Machine's from
	// State.PrevHost as observed (with step 5, after the state that
	// records it found, State.PrevHostSeen, is saved): one landed there
	// after the move. A second move that replaces State.PrevHost keeps
	// that host in State.EarlierHosts.
	RemovePrevRequest bool
	// RemoveEarlierRequests names the hosts of State.EarlierHosts (as
	// observed) to remove a request of this Machine's from (with step
	// 5): one was found there.
	RemoveEarlierRequests []string
	// Release: remove the Machine from the admission record (step 9);
	// it releases no host and no lock of the reboot API.
	Release      bool
	RequeueAfter time.Duration
	Reason       string
}

// RebootValue returns the value of RebootAnnotation for one attempt of a
// Machine's remediation: hard mode (fencing must not wait for a soft
// shutdown), the Machine UID (the seed), and the attempt's start, which
// makes every attempt a distinct reboot request. It is always valid JSON,
// whatever bytes the UID holds.
func RebootValue(machineUID string, attempt time.Time) string {
	b, _ := json.Marshal(struct {
		Mode        string `json:"mode"`
		Machine     string `json:"machine"`
		RequestedAt string `json:"requestedAt,omitempty"`
	}{"hard", machineUID, stamp(attempt)})
	return string(b)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Decide is Config{}.Decide.
func Decide(o Observed, now time.Time) Decision { return Config{}.Decide(o, now) }

// decide is Decide in Cluster API's nouns.
func (c Config) decide(o Observed, now time.Time) Decision {
	c = c.withDefaults()
	d := Decision{State: o.State}
	st := &d.State
	m := o.Machine
	if st.PrevHost != "" && st.PrevHostSince.IsZero() {
		// A state persisted before PrevHostSince existed (or rewritten by
		// a controller of that version, which drops the fields it does not
		// know): read from the last request's time, as then, and a
		// sighting there unknown, so taken as made (movedFrom): the host
		// is counted while it may be off after that time.
		st.PrevHostSince = prevSince(o.State)
		st.PrevHostSeen = cmp.Or(st.PrevHostSeen, st.PrevHostSince)
	}
	if !m.NeedsRemediation && !st.Canceled && (st.Phase == PhasePoweringOn || st.Phase == PhaseWaitingForNode && !(o.Node.Exists && o.Node.Ready)) {
		// Cancelled after the power-off (with the Node back, the mark is
		// gone because the remediation removed it): only bring the host
		// and Node back, never a new power cycle (retryOrEscalate).
		st.Canceled, st.CanceledAt = true, now
	}
	timedOut := !st.Started.IsZero() && now.Sub(st.Started) >= c.Timeout
	if st.Canceled && !st.CanceledAt.IsZero() {
		timedOut = now.Sub(st.CanceledAt) >= c.Timeout
	}
	// request writes the attempt's reboot request anew: a new T, a new
	// value.
	// It is never written while a host the Machine moved from may be off
	// for a request of its found there (prevOffHost): not a second host
	// off for the same Machine; it waits, and fails at the attempt's
	// timeout (waitPrevOff).
	request := func(why string) {
		if h := o.prevOffHost(); h != "" {
			c.waitPrevOff(o, now, timedOut, &d, h, why)
			return
		}
		if o.Host.Name != "" && st.Host != "" && o.Host.Name != st.Host {
			movePrev(&d, st.Host, now) // moved: a stray write may still land there
		}
		st.RequestedAt, st.Host = now, cmp.Or(o.Host.Name, st.Host) // never "" over a known host
		d.AddRebootAnnotation, d.RebootValue = true, RebootValue(m.UID, now)
		d.Reason = why
		d.RequeueAfter = c.PollInterval
	}

	switch st.Phase {
	case PhaseNone, PhaseDone, PhaseFailed:
		if o.Host.RebootAnnotation {
			// Never leave a host held off by a remediation that is over.
			d.RemoveRebootAnnotation = true
			if st.StraySeen.IsZero() {
				// Saved before the request is removed; no later than the
				// T its value carries: the host may have been powered
				// off for it before this pass found it.
				st.StraySeen = strayBound(*st, o.Host.RequestT, now)
				if st.Host == "" && o.Host.Name != "" {
					// No host recorded: the host read is HostOf's, the
					// one it was found on.
					st.Host = o.Host.Name
				}
			}
		}
		c.cleanup(o, &d)
		switch {
		case !m.NeedsRemediation:
			d.Reason = "healthy"
			st.UnhealthyAgain = time.Time{}
			if st.Phase == PhaseFailed && keeps(*st, o.Host) {
				// Cleared only once its host is no longer held: none keeps
				// no admission for a host held by its last request (only
				// for one found there since: State.StraySeen), so a Failed
				// cleared while the host is off would let go of the host (its admission, in kube
				// its finalizer) while the reboot controller still means
				// to power it on.
				d.Reason = "needs-remediation annotation gone: failed remediation kept until its host is on"
				d.RequeueAfter = c.PollInterval
			} else if st.Phase == PhaseFailed {
				st.Phase = PhaseNone
				d.Reason = "needs-remediation annotation gone: failed remediation cleared"
			}
			d.Release = o.Admitted && !keeps(o.State, o.Host)
		case st.Phase == PhaseFailed && m.HasControllerOwner:
			// The escalation's deletion, repeated until it is done: a
			// pass that persisted Failed and stopped before it (an error,
			// a crash) must not leave the Machine unreplaced.
			d.DeleteMachine = true
			d.Reason = "remediation failed: delete the Machine for its owner to replace"
			d.Release = o.Admitted && !keeps(o.State, o.Host)
		case st.Phase == PhaseFailed:
			d.Reason = "remediation failed; waiting for the Machine to be replaced or the annotation removed"
			d.Release = o.Admitted && !keeps(o.State, o.Host)
		case o.Host.RebootAnnotation && st.Host != "" && o.Host.Name != st.Host:
			// The last attempt's request still holds the host it was
			// written to, which the Machine no longer maps to: released
			// first, never two hosts held at once.
			d.Reason = fmt.Sprintf("the last request still holds host %s, which the machine no longer maps to: release it before starting", st.Host)
			d.RequeueAfter = c.PollInterval
		case st.Host != "" && o.Host.Name != st.Host && strayOff(*st, o.Host):
			// Its last host may be off for a stale request of its found
			// there since the remediation ended (ownStray): the same wait.
			c.waitOverMoved(o, now, &d, st.Host, fmt.Sprintf("host %s, %s", st.Host, strayWhy))
		case st.Host != "" && o.Host.Name != st.Host && (o.State.Phase != PhaseDone || o.State.Canceled) && moveBlocked(o):
			// Its request is gone, but the host may still be off for it
			// (moveBlocked's rule: the reboot controller's record of a
			// power-on is not enough to power a second host off for the
			// same Machine): no new attempt, on another host or on none
			// (a Machine that maps to no host now would start one that
			// forgets the old host, and release its admission judged on
			// no host), before it is powered on. The admission is kept.
			// The wait, from when the Machine was first seen unhealthy
			// again, ends at Timeout: the remediation fails (escalates),
			// as an attempt whose move is blocked does (waitMoved).
			c.waitOverMoved(o, now, &d, st.Host, fmt.Sprintf("host %s, which the machine no longer maps to, may still be off for the last request%s", st.Host, unread(o.Host)))
		case o.prevOffHost() != "":
			// A host it moved from may be off for a request of its found
			// there (prevHost): the same wait, not a second host off for
			// the same Machine.
			h := o.prevOffHost()
			c.waitOverMoved(o, now, &d, h, fmt.Sprintf("host %s, %s", h, prevOffWhy))
		default:
			c.start(o, now, &d)
		}

	case PhasePowerOffRequested:
		switch {
		case !m.NeedsRemediation && o.Host.Missing && !held(o.Host):
			// No host the Machine maps to, and the request's host (read
			// on State.Host) shows nothing of the request: nothing was
			// or can be powered off. A request of another attempt found
			// there is removed before the admission is released.
			st.Phase, st.Finished, st.Canceled, st.CanceledAt = PhaseDone, now, true, now
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Release = o.Admitted
			d.Reason = "cancelled before the node was fenced, no host: done"
			c.cleanup(o, &d)
		case !m.NeedsRemediation:
			// The request may have powered the host off already: the
			// remediation stays in flight (admitted, holding its host) until
			// the reboot controller powered it on. So does one whose
			// Machine maps to no host now (Host.Missing) while the host
			// its request was written to is held for it: that host is
			// judged on its own evidence, not on the Machine's mapping.
			st.Phase, st.Canceled, st.CanceledAt = PhasePoweringOn, true, now
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Reason = "cancelled before the node was fenced: release the host, wait for it to be on"
			d.RequeueAfter = c.PollInterval
		case moved(o) && o.Host.RebootAnnotation:
			c.releaseMoved(o, &d)
		case moved(o) && moveBlocked(o):
			c.waitMoved(o, now, timedOut, &d, "host not fenced in time")
		case moved(o):
			request(fmt.Sprintf("the machine moved from host %s to %s, released: request a reboot of %s", st.Host, o.Host.Name, o.Host.Name))
		case timedOut:
			c.retryOrEscalate(o, now, &d, "host not fenced in time")
		case o.Host.Missing:
			d.Reason = "the machine has no host (deleted or released): waiting for it until the timeout"
			d.RequeueAfter = c.PollInterval
		case !o.Host.Requested:
			request("reboot request missing or replaced: request again")
		case !o.Host.Fenced:
			d.Reason = "waiting for the reboot controller's evidence that the host is off"
			d.RequeueAfter = c.PollInterval
		default:
			st.Phase = PhaseNodeDeleted
			c.fenceNode(o, &d)
		}

	case PhaseNodeDeleted:
		fenced := !o.Node.Exists || c.OutOfService && o.Node.OutOfService
		switch {
		case m.NeedsRemediation && moved(o) && o.Host.RebootAnnotation:
			c.releaseMoved(o, &d)
		case m.NeedsRemediation && moved(o) && moveBlocked(o):
			c.waitMoved(o, now, timedOut, &d, "node not fenced in time")
		case m.NeedsRemediation && moved(o):
			st.Phase = PhasePowerOffRequested
			request(fmt.Sprintf("the machine moved from host %s to %s, released: request a reboot of %s and fence again", st.Host, o.Host.Name, o.Host.Name))
		case !fenced && o.Host.Fenced && o.Host.Requested && m.NeedsRemediation:
			c.fenceNode(o, &d)
		case !m.NeedsRemediation:
			st.Phase, st.Canceled, st.CanceledAt = PhasePoweringOn, true, now
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Reason = "cancelled: release the host"
			d.RequeueAfter = c.PollInterval
		case !fenced && o.Host.Missing:
			d.Reason = "the machine has no host (deleted or released): cannot fence the node; waiting until the timeout"
			d.RequeueAfter = c.PollInterval
			if timedOut {
				c.retryOrEscalate(o, now, &d, "node not fenced in time")
			}
		case !fenced && !o.Host.Requested:
			st.Phase = PhasePowerOffRequested
			request("reboot request missing or replaced before the node was fenced: request again")
		case !fenced:
			d.Reason = "host not known off: cannot fence the node now"
			d.RequeueAfter = c.PollInterval
			if timedOut {
				c.retryOrEscalate(o, now, &d, "node not fenced in time")
			}
		default:
			st.Phase = PhasePoweringOn
			d.RemoveRebootAnnotation = o.Host.RebootAnnotation
			d.Reason = "node fenced: power on"
			d.RequeueAfter = c.PollInterval
		}

	case PhasePoweringOn:
		d.RemoveRebootAnnotation = o.Host.RebootAnnotation
		switch {
		case o.Host.PoweredOn:
			st.Phase = PhaseWaitingForNode
			d.Reason = "host on: wait for the node"
			d.RequeueAfter = c.PollInterval
		case timedOut:
			c.retryOrEscalate(o, now, &d, "host not on in time")
		default:
			d.Reason = "waiting for the reboot controller to power the host on"
			d.RequeueAfter = c.PollInterval
			if o.Host.UpReadFrom.After(now) {
				// Nothing may change in the stores when the reading
				// starts to count: look again then.
				d.RequeueAfter = min(c.PollInterval, o.Host.UpReadFrom.Sub(now))
			}
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
		if c.cleanup(o, &d) {
			// Side effects first, phase later: a crash in between repeats
			// them, it never skips them.
			d.Reason = "node back: " + d.Reason
			d.RequeueAfter = c.PollInterval
			break
		}
		if m.NeedsRemediation && !st.Canceled {
			// Removed before Done is persisted: a crash in between must not
			// look like the node needing remediation again.
			d.RemoveNeedsRemediation = true
			d.Reason = "node back: remove the needs-remediation annotation"
			d.RequeueAfter = c.PollInterval
			break
		}
		st.Phase, st.Finished, st.UnhealthyAgain = PhaseDone, now, time.Time{}
		d.Release = o.Admitted
		d.Reason = "node back: done"
		if st.Canceled {
			d.Reason = "node back after cancellation: done"
		}
	}
	c.ownStray(o, &d)
	c.prevHost(o, now, &d)
	return d.finish(o)
}

// start decides for an unhealthy Machine with no remediation in flight:
// a retry of the last remediation, a new one, escalation, or waiting for
// the storm guard.
func (c Config) start(o Observed, now time.Time, d *Decision) {
	st := &d.State
	if !st.Finished.IsZero() && st.UnhealthyAgain.IsZero() {
		st.UnhealthyAgain = now
	}
	retry := !st.Finished.IsZero() && st.UnhealthyAgain.Sub(st.Finished) < c.MinHealthyPeriod
	attempt := 1
	if retry {
		attempt = st.Attempt + 1
	}
	if attempt > 1+c.RetryLimit {
		c.escalate(o, now, d, fmt.Sprintf("unhealthy again %s after remediation (within %s)",
			st.UnhealthyAgain.Sub(st.Finished).Round(time.Second), c.MinHealthyPeriod))
		return
	}
	if retry && now.Sub(st.Finished) < c.RetryPeriod {
		st.Message = fmt.Sprintf("retry %d waits for the retry period (%s)", attempt, c.RetryPeriod)
		d.Reason = st.Message
		d.RequeueAfter = min(c.PollInterval, st.Finished.Add(c.RetryPeriod).Sub(now))
		return
	}
	if (!o.Admitted || !o.State.StraySeen.IsZero()) && !o.MayStart {
		// An admission kept, or taken, only to count its own host off for
		// a stray request of its (ownStray) admits no new attempt.
		st.Message = "storm guard: " + o.GuardReason
		d.Reason = st.Message
		d.RequeueAfter = c.PollInterval
		return
	}
	d.Admit = !o.Admitted
	backup := st.Backup
	tainted := st.Tainted
	if backup == nil {
		backup = backupOf(o.Node)
	}
	// A request of this Machine's may still land on the host it moved
	// from: PrevHost is kept until a pass finds none there (prevHost).
	if st.Host != "" && o.Host.Name != "" && o.Host.Name != st.Host {
		movePrev(d, st.Host, now) // moved: a stray write may still land there
	}
	*st = State{Phase: PhasePowerOffRequested, Attempt: attempt, Started: now, RequestedAt: now, Host: o.Host.Name,
		PrevHost: st.PrevHost, PrevHostSince: st.PrevHostSince, PrevHostSeen: st.PrevHostSeen, EarlierHosts: st.EarlierHosts, Backup: backup, Tainted: tainted}
	// The new request replaces the last one on the same host (decide
	// releases another host's first).
	d.RemoveRebootAnnotation = false
	// Without a host nothing can be asked: the attempt waits for one until
	// its timeout, then escalates.
	if !o.Host.Missing {
		d.AddRebootAnnotation, d.RebootValue = true, RebootValue(o.Machine.UID, now)
	}
	d.Reason = fmt.Sprintf("attempt %d: power off", attempt)
	if retry {
		d.Reason = fmt.Sprintf("attempt %d (unhealthy again within %s): power off", attempt, c.MinHealthyPeriod)
	}
	d.RequeueAfter = c.PollInterval
}

// msgCleanupWaits is State.Message while a backup waits for its Node.
const msgCleanupWaits = "node not back: its labels and annotations (and our taint) are restored when it returns"

// cleanup restores what the remediation changed on the Node (backed-up
// labels and annotations, its own out-of-service taint) once the Node is
// back, and forgets the backup when nothing is left to restore. It reports
// whether a side effect is due.
func (c Config) cleanup(o Observed, d *Decision) bool {
	st := &d.State
	if st.Backup == nil && !st.Tainted {
		return false
	}
	if !o.Node.Exists {
		if InFlight(st.Phase) {
			return false
		}
		st.Message = msgCleanupWaits
		return false
	}
	labels, annotations := missing(st.Backup, o.Node)
	untaint := st.Tainted && o.Node.OutOfService
	if labels == nil && annotations == nil && !untaint {
		st.Backup, st.Tainted = nil, false
		if st.Message == msgCleanupWaits || st.Message == c.Nouns.say(msgCleanupWaits) {
			st.Message = ""
		}
		return false
	}
	d.RestoreNode = o.Node.Name
	d.RestoreLabels, d.RestoreAnnotations, d.RemoveTaint = labels, annotations, untaint
	switch {
	case untaint && (labels != nil || annotations != nil):
		d.Reason = "restore its labels and annotations, remove the out-of-service taint"
	case untaint:
		d.Reason = "remove the out-of-service taint"
	default:
		d.Reason = "restore its labels and annotations"
	}
	return true
}

func (d Decision) finish(o Observed) Decision {
	if d.RemoveRebootAnnotation && d.AddRebootAnnotation {
		d.RemoveRebootAnnotation = false
	}
	if !InFlight(d.State.Phase) && d.State.Phase != PhaseNone && d.Reason != "" && d.State.Message == "" {
		d.State.Message = d.Reason
	}
	d.UpdateState = !d.State.Equal(o.State)
	return d
}

func (c Config) fenceNode(o Observed, d *Decision) {
	switch {
	case !o.Node.Exists:
		d.Reason = "host fenced; no node to delete"
	case c.OutOfService && o.Node.OutOfService:
		d.Reason = "host fenced; node already out of service"
	case c.OutOfService:
		d.TaintNode = true
		d.State.Tainted = true
		d.Reason = "host fenced: taint the node out-of-service"
	default:
		d.DeleteNode = true
		d.Reason = "host fenced: delete the node"
	}
	d.RequeueAfter = c.PollInterval
}

func (c Config) retryOrEscalate(o Observed, now time.Time, d *Decision, why string) {
	st := &d.State
	if st.Canceled {
		d.RemoveRebootAnnotation = o.Host.RebootAnnotation
		st.Phase, st.Finished = PhaseDone, now
		d.Release = o.Admitted && !held(o.Host)
		d.Reason = why + " after cancellation: give up waiting"
		c.cleanup(o, d)
		return
	}
	if o.Host.Missing {
		// No host to power-cycle again: a retry could not even ask.
		c.giveUp(o, now, d, why+" (the machine has no host: give it one)")
		return
	}
	if moved(o) && o.Host.RebootAnnotation {
		// Never two held at once: the old host's request goes first.
		c.releaseMoved(o, d)
		return
	}
	if moved(o) && moveBlocked(o) {
		// Nor is the new host asked while the old one may still be off
		// for the request: no retry, the remediation fails (its admission
		// kept while the old host is held).
		c.giveUp(o, now, d, fmt.Sprintf("%s (the machine moved from host %s to %s, and %s, off for its request, is not known on since%s: %s is not asked; power %s on, by hand if its BMC keeps refusing)",
			why, o.State.Host, o.Host.Name, o.State.Host, unread(o.Host), o.Host.Name, o.State.Host))
		return
	}
	if h := o.prevOffHost(); h != "" {
		// Nor is a host power-cycled again while a host it moved from
		// may be off for a request of its found there (the retry comes
		// at the attempt's timeout, which ends the wait: waitPrevOff).
		c.giveUp(o, now, d, fmt.Sprintf("%s (host %s, %s, is not known on since: no retry, %s is not asked again; power %s on, by hand if its BMC keeps refusing)",
			why, h, prevOffWhy, cmp.Or(o.Host.Name, st.Host), h))
		return
	}
	if st.Attempt <= c.RetryLimit {
		st.Attempt++
		if moved(o) {
			movePrev(d, st.Host, now) // moved: a stray write may still land there
		}
		st.Phase, st.Started, st.RequestedAt, st.Host = PhasePowerOffRequested, now, now, cmp.Or(o.Host.Name, st.Host)
		if st.Backup == nil {
			st.Backup = backupOf(o.Node)
		}
		d.AddRebootAnnotation, d.RebootValue = true, RebootValue(o.Machine.UID, now)
		d.RemoveRebootAnnotation = false
		d.Reason = fmt.Sprintf("%s: retry, attempt %d", why, st.Attempt)
		d.RequeueAfter = c.PollInterval
		return
	}
	c.escalate(o, now, d, why)
}

// escalate fails the remediation once its power cycles ran out (Config.
// RetryLimit): the message says so.
func (c Config) escalate(o Observed, now time.Time, d *Decision, why string) {
	c.fail(o, now, d, why+": retries exhausted")
}

// giveUp fails the remediation for why, which is not that its retries
// ran out (it says the cause and the operator's fix).
func (c Config) giveUp(o Observed, now time.Time, d *Decision, why string) {
	c.fail(o, now, d, why)
}

func (c Config) fail(o Observed, now time.Time, d *Decision, why string) {
	st := &d.State
	d.RemoveRebootAnnotation = o.Host.RebootAnnotation
	st.Phase, st.Finished = PhaseFailed, now
	d.Release = o.Admitted && !held(o.Host)
	if o.Machine.HasControllerOwner {
		d.DeleteMachine = true
		d.Reason = why + ", delete the Machine for its owner to replace"
		st.Message = d.Reason
		return
	}
	d.Reason = why + ", remediation failed"
	st.Message = d.Reason
	c.cleanup(o, d)
}

func backupOf(n Node) *NodeBackup {
	if !n.Exists {
		return nil
	}
	return &NodeBackup{Name: n.Name, Labels: maps.Clone(n.Labels), Annotations: maps.Clone(n.Annotations)}
}

// Lacking returns the backed-up labels and annotations n lacks (values
// already on n win); nil maps when it lacks none (b may be nil).
func (b *NodeBackup) Lacking(n Node) (labels, annotations map[string]string) { return missing(b, n) }

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
