package remediation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Store errors; implementations return them wrapped.
var (
	// ErrNotFound: no such Machine.
	ErrNotFound = errors.New("remediation: not found")
	// ErrConflict: the Machine changed since it was read.
	ErrConflict = errors.New("remediation: changed since it was read")
)

// MachineRecord is a stored Machine with its remediation state.
type MachineRecord struct {
	Machine Machine
	State   State
	// Version is the store's version for optimistic concurrency.
	Version string
}

// MachineStore reads and writes Machines. Like every store of this
// package (NodeStore, AdmissionStore, RecordStore), it writes nothing once
// a write's ctx has ended: it checks ctx.Err() just before it writes (or
// sends), not only ctx.Done(), since a Guard's context (reboot.ClockBound)
// reports the end of its lease through Err before its timer closes Done.
// The Reconciler writes through reboot.Fenced, fenced only by that
// context: a leader paused between its Hold and its write is stopped
// only by the store (remediationtest.Contract checks it).
type MachineStore interface {
	// Get returns the Machine or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (MachineRecord, error)
	// List returns every Machine (for the storm guard).
	List(ctx context.Context) ([]MachineRecord, error)
	// SaveState persists s if version is current, else ErrConflict.
	SaveState(ctx context.Context, name, version string, s State) error
	// RemoveNeedsRemediation removes NeedsRemediationAnnotation.
	RemoveNeedsRemediation(ctx context.Context, name string) error
	// Delete deletes the Machine (its owner replaces it).
	Delete(ctx context.Context, name string) error
}

// NodeStore reads and changes Nodes; no change once ctx has ended
// (ctx.Err() checked just before it writes, as MachineStore says).
type NodeStore interface {
	// Get returns the Node; Exists is false if there is none (no error).
	Get(ctx context.Context, name string) (Node, error)
	// Delete deletes the Node if its UID is uid (any Node of that name if
	// uid is empty): a Node registered again under the same name since it
	// was read is another Node, and the deletion fails with an error
	// wrapping ErrConflict. Deleting a missing Node succeeds.
	Delete(ctx context.Context, name, uid string) error
	// SetOutOfService adds (on) or removes OutOfServiceTaint with effect
	// NoExecute.
	SetOutOfService(ctx context.Context, name string, on bool) error
	// AddMetadata adds labels and annotations the Node lacks.
	AddMetadata(ctx context.Context, name string, labels, annotations map[string]string) error
}

// HostStore reads a Machine's host and changes its reboot annotation.
// RebootAPIHosts implements it over a reboot.HostStore with the reboot
// protocol's client side.
type HostStore interface {
	// Get returns what the remediation needs of the Machine's host, for
	// the reboot request req the Reconciler reads it for (in flight,
	// RequestFor: the current attempt's; out of flight, LastRequest: the
	// last attempt's, or one whose Value only names the Machine): Host.Fenced and
	// Host.PoweredOn answer for that request only, and
	// Host.RebootAnnotation for a request of this Machine's.
	Get(ctx context.Context, machine string, req Request) (Host, error)
	// AddRebootAnnotation sets RebootAnnotation to req.Value, req.At being
	// the request's T (taken before this call).
	AddRebootAnnotation(ctx context.Context, machine string, req Request) error
	// RemoveRebootAnnotation removes RebootAnnotation (absent is fine).
	RemoveRebootAnnotation(ctx context.Context, machine string) error
}

// RequestRemover is an optional ability of a HostStore that names hosts
// (Host.Name): it removes RebootAnnotation from the host the request was
// written to (req.Host, persisted in State.Host, and recorded with the
// admission: Admissions.Requests), which may no longer be the Machine's
// host, without asking the Machine's mapping (the Machine may be gone),
// and only if its value is this Machine's (SameMachine with req.Value):
// another Machine's request on that host is left. The Reconciler uses
// it, when the HostStore has it, for every removal of an attempt's
// request (RebootAPIHosts has it).
type RequestRemover interface {
	RemoveRebootRequest(ctx context.Context, machine string, req Request) error
}

// RequestFinder is an optional ability of a HostStore that is a
// RequestRemover: it lists the remediation reboot requests on every host
// it serves (Value and Host; At may be zero). The Reconciler uses it for
// a Machine that is gone whose admission records no request (a record
// written before Admissions.Requests existed) and whose host the
// HostStore no longer resolves: the requests no existing Machine owns are
// removed before the admission is released, one per pass, each recorded
// as the Machine's (Admissions.Requests) before it is removed, and the
// admission is kept until a pass finds none left (one recorded as
// another admission's is left to that Machine's pass) and the last
// recorded one's host is not held (read for the T its value carries).
// It must list only requests a
// Machine remediation may have written: the same annotation carries other
// controllers' requests (the kube module's leaves out those naming a live
// PowerCycleRemediation), which are not to be removed. Without it such an
// admission is kept, and the pass fails with ErrOrphanRequest.
type RequestFinder interface {
	RebootRequests(ctx context.Context) ([]Request, error)
}

// ErrOrphanRequest: a Machine that is gone is admitted by a record
// written before requests were recorded (no Admissions.Requests entry)
// and the HostStore resolves no host for it, and cannot list the
// requests (RequestFinder): its request may hold a host off, so its
// admission is kept. Fix: remove the Machine's reboot annotation from its
// host by hand and the Machine from the admission record.
var ErrOrphanRequest = errors.New("remediation: the reboot request of a Machine that is gone cannot be found (remove its reboot annotation from its host by hand, then its name from the admission record)")

// Admissions is the shared admission record: the Machines whose
// remediation the storm guard admitted and that have not been released.
type Admissions struct {
	Machines []string
	// Requests holds, per admitted Machine, the reboot request it last
	// wrote (Value, T and Host: the host it was written to), recorded
	// here before the request is written to the host: it outlives the
	// Machine, so that a Machine deleted mid-remediation (its State, and
	// State.Host, gone with it) has the request removed from that host
	// before its admission is released, whatever HostOf answers then.
	// Removed with the Machine's admission. Nil in records written
	// before it existed (then the HostStore's mapping is asked).
	Requests map[string]Request
	// Members holds, per Machine admitted by a version that records it,
	// what the storm guard and abandon need once the Machine is gone:
	// its scope (cluster, health check, control plane) and whether its
	// remediation may have written a request. An admitted Machine without
	// an entry (a record written before it existed) counts as a
	// control-plane Machine and as one that wrote a request. Removed with
	// the Machine's admission.
	Members map[string]Member
	// Others are the admissions, in the same record, of another
	// remediation controller (another kind of object, whose names are not
	// this store's), each with the host it holds ("" if the record does
	// not say): the storm guard counts each as a host under remediation,
	// and a store that is also a lock per host counts their hosts as
	// held. The Reconciler never changes them: a store that shares its
	// record writes them back as read, under its compare-and-swap.
	Others map[string]string
	// OthersControlPlane tells, per name of Others, whether the other
	// controller recorded that admission as a control-plane machine's
	// (its Member.ControlPlane): the storm guard lets one control-plane
	// machine be remediated at a time across both controllers. A name of
	// Others without an entry (a record written before the flag was
	// carried, or whose member is unknown) counts as control plane. Read
	// only, as Others.
	OthersControlPlane map[string]bool
	// Version is the store's version, for compare-and-swap.
	Version string
}

// Member is what the admission record keeps of one admitted Machine
// (Admissions.Members).
type Member struct {
	// Cluster, HealthCheck and ControlPlane are the Machine's when it was
	// admitted: a Machine deleted while admitted is counted by the storm
	// guard where it was (MayStart).
	Cluster, HealthCheck string
	ControlPlane         bool
	// Wrote: a reboot request of this admission may have been written
	// (recorded before it is written). False: none was (a Machine
	// admitted while it had no host), and a Machine gone with it holds no
	// host.
	Wrote bool
	// PrevHost is State.PrevHost as last recorded, with PrevHostSince,
	// PrevHostSeen and EarlierHosts: a request of this Machine's found on
	// one of these hosts is removed too when the Machine is gone, and the
	// admission kept while that host may be off for it (Seen set, as in
	// State). A host the state forgot stays here, its Seen cleared, until
	// another move replaces it.
	PrevHost string
	// PrevHostSince is State.PrevHostSince (zero in records written
	// before it existed, or rewritten by a controller of that version:
	// PrevHost is then read from the recorded request's time, and a
	// request of the Machine's taken as found there then, PrevHostSeen
	// unknown).
	PrevHostSince time.Time
	// PrevHostSeen is State.PrevHostSeen, or when the gone Machine's
	// release found a request of its on PrevHost.
	PrevHostSeen time.Time
	// EarlierHosts is State.EarlierHosts (Seen set likewise).
	EarlierHosts []MovedFrom
}

// Equal reports whether two entries are the same.
func (m Member) Equal(o Member) bool {
	return m.Cluster == o.Cluster && m.HealthCheck == o.HealthCheck && m.ControlPlane == o.ControlPlane && m.Wrote == o.Wrote &&
		m.PrevHost == o.PrevHost && m.PrevHostSince.Equal(o.PrevHostSince) && m.PrevHostSeen.Equal(o.PrevHostSeen) &&
		slices.EqualFunc(m.EarlierHosts, o.EarlierHosts, MovedFrom.Equal)
}

// movedFrom returns the hosts the member's Machine moved from, as
// State's (movedFrom); a record written before PrevHostSince existed (or
// rewritten by a controller of that version, which drops the fields it
// does not know) reads PrevHost from at, the recorded request's time,
// and takes a request of the Machine's as found there then (Seen = at):
// unknown errs towards holding. A recorded request without a time (a
// failed remediation cleared: LastRequest has no T) gives knownEarliest
// instead (with no time, nothing would count, and a gone Machine's
// admission would be released while a host it moved from is off for a
// request of its); no admission time is recorded to bound it, so
// readMembersPrev reads such a host from the reboot controller's last
// power-on it confirmed On (Host.OnConfirmedAt), where it has one: a
// power-off for a request of the Machine's ended by then, and one since
// is another's or its owner's. Without one, any power-off of the host
// counts until it is read on since.
func (m Member) movedFrom(at time.Time) []MovedFrom {
	at = cmp.Or(at, knownEarliest)
	seen := m.PrevHostSeen
	if m.PrevHostSince.IsZero() {
		seen = cmp.Or(seen, at)
	}
	return movedFrom(State{PrevHost: m.PrevHost, PrevHostSince: cmp.Or(m.PrevHostSince, at), PrevHostSeen: seen, EarlierHosts: m.EarlierHosts})
}

// Has reports whether machine is admitted.
func (a Admissions) Has(machine string) bool { return slices.Contains(a.Machines, machine) }

// AdmissionStore holds the one record that makes the storm guard's
// admission atomic across concurrent reconciles and processes: a
// remediation starts only after a compare-and-swap write that adds its
// Machine to the record it was judged against. PutAdmissions writes
// nothing once ctx has ended (ctx.Err() checked just before it writes, as
// MachineStore says).
type AdmissionStore interface {
	// GetAdmissions returns the record (empty with a version if none).
	GetAdmissions(ctx context.Context) (Admissions, error)
	// PutAdmissions writes a if a.Version is current, else returns an
	// error wrapping ErrConflict.
	PutAdmissions(ctx context.Context, a Admissions) error
}

// Reconciler applies phased decisions (or, with Table, the seed's truth
// table) for Machines.
//
// Concurrency: Reconcile may run for several Machines at once (Kubernetes
// controllers' MaxConcurrentReconciles > 1), and from several processes.
// Admission by the storm guard is atomic because it goes through the
// versioned shared record of Admissions: a reconcile judges the fleet
// against the record it read, adds its Machine with a compare-and-swap
// write, and only then persists the new remediation; one that loses the
// race gets ErrConflict and decides again. What must not happen is two
// reconciles of the same Machine at once (work queues guarantee it), and
// two controllers acting on the same hosts should run under leader
// election anyway (the reboot controller assumes one actor per host).
type Reconciler struct {
	Machines MachineStore
	Nodes    NodeStore
	Hosts    HostStore
	// Admissions holds the shared admission record (required in phased
	// mode).
	Admissions AdmissionStore
	// Config tunes phased decisions.
	Config Config
	// Limit is the storm guard's limit on unhealthy machines.
	Limit MaxUnhealthy
	// Table selects the seed's stateless table instead of the phased mode.
	// It loops under a health checker that re-adds its annotation; it
	// exists to reproduce the seed.
	Table bool
	// Now is the controller's clock.
	Now func() time.Time
	// Logger, if set, gets one line per pass that does something.
	Logger *slog.Logger
	// Guard, if set, fences every write (Machines, Nodes, hosts'
	// annotations, admissions) by this process's leadership, as in
	// reboot.Reconciler: a refused pass returns an error wrapping
	// reboot.ErrNotLeader and acts no more.
	Guard reboot.Guard
}

// Result is what a pass decided.
type Result struct {
	Decision     Decision
	TableAction  TableAction
	RequeueAfter time.Duration
	// Busy says a remediation is under way for the Machine after the
	// pass: one in flight or asked for, an admission held, a request or
	// Node metadata still to clean up, or an action taken in this pass
	// (with Table: an action taken, NeedsRemediation, or the host's reboot
	// annotation). Loop gives it to the Runner (reboot.Next.Busy): a busy
	// Machine dropped from the listing is still reconciled.
	Busy bool
}

// Reconcile runs one pass for the named Machine.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	rec, err := r.Machines.Get(ctx, name)
	if errors.Is(err, ErrNotFound) && !r.Table {
		// Deleted (for its owner to replace, or mid-remediation): let go
		// of its host, then release its admission.
		return Result{}, errors.Join(fmt.Errorf("remediation: machine %s: %w", name, err), r.abandon(ctx, name))
	}
	if err != nil {
		return Result{}, fmt.Errorf("remediation: machine %s: %w", name, err)
	}
	req := RequestFor(rec.Machine, rec.State)
	read := req
	if !InFlight(rec.State.Phase) {
		// Over: is its host still held by its last request (Held)?
		read = LastRequest(rec.Machine, rec.State)
	}
	host, err := r.Hosts.Get(ctx, name, read)
	if err != nil {
		return Result{}, fmt.Errorf("remediation: host of %s: %w", name, err)
	}
	if _, ok := r.Hosts.(RequestRemover); !ok {
		// A request can be removed only where the HostStore resolves the
		// Machine now: persist no host, decide no move.
		host.Name = ""
	}
	node := Node{}
	if n := nodeName(rec); n != "" {
		if node, err = r.Nodes.Get(ctx, n); err != nil {
			return Result{}, fmt.Errorf("remediation: node of %s: %w", name, err)
		}
	}
	if r.Table {
		return r.table(ctx, rec, node, host)
	}

	adm, err := r.Admissions.GetAdmissions(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("remediation: admissions: %w", err)
	}
	if prev, ok := adm.Requests[name]; ok && adm.Has(name) && !ownRequest(prev, rec.Machine.UID) {
		// The admission, and its request, are an earlier Machine's of
		// this name (deleted, and one of the same name created since):
		// that request is removed from its host and the admission
		// released before this Machine is looked at.
		err := r.releaseRecorded(ctx, name, adm, "a Machine of this name with another UID")
		return Result{RequeueAfter: time.Nanosecond}, err
	}
	o := Observed{Machine: rec.Machine, Node: node, Host: host, State: rec.State, Admitted: adm.Has(name)}
	if err := r.readPrev(ctx, rec, &o); err != nil {
		return Result{}, err
	}
	// An admission kept only to count its own host off for a stray
	// request (State.StraySeen) admits no new attempt: the storm guard
	// judges it as if it were not admitted.
	stray := !rec.State.StraySeen.IsZero()
	if rec.Machine.NeedsRemediation && !InFlight(rec.State.Phase) && (!o.Admitted || stray) {
		all, err := r.Machines.List(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("remediation: list machines: %w", err)
		}
		fleet := make([]FleetMachine, len(all))
		for i, m := range all {
			fleet[i] = FleetMachine{Name: m.Machine.Name, Cluster: m.Machine.Cluster, HealthCheck: m.Machine.HealthCheck, Node: m.Machine.NodeName, ControlPlane: m.Machine.ControlPlane,
				Unhealthy: m.Machine.NeedsRemediation, Remediating: InFlight(m.State.Phase) || adm.Has(m.Machine.Name)}
			if m.Machine.Name == name && stray {
				fleet[i].Remediating = false
			}
		}
		fleet = withGone(fleet, adm, rec.Machine)
		o.MayStart, o.GuardReason = MayStart(fleet, name, r.Limit)
	}
	d := r.Config.Decide(o, r.Now())
	res := Result{Decision: d, RequeueAfter: d.RequeueAfter, Busy: busy(o, d)}
	// The request's T is the time it was written (RequestedAt), as
	// LastRequest and RequestFor read it: a re-request's At is not the
	// attempt's start.
	attempt := Request{Value: d.RebootValue, At: cmp.Or(d.State.RequestedAt, d.State.Started), Host: d.State.Host}
	// The request is recorded with the admission before it is written
	// (step 1): it outlives the Machine (abandon).
	recorded := attempt
	record := d.AddRebootAnnotation && (d.Admit || o.Admitted)
	if st := stateAfter(rec.State, d); !record && (o.Admitted || d.Admit) && !d.Release && !InFlight(st.Phase) {
		// Over, its admission kept while its host is held: the last
		// request is what abandon reads the host for once the Machine is
		// gone (HostOf no longer answers for it).
		recorded, record = LastRequest(rec.Machine, st), true
	}
	record = record && recorded.Host != "" &&
		(adm.Requests[name].Value != recorded.Value || adm.Requests[name].Host != recorded.Host)
	member, recordMember := memberOf(adm, rec.Machine, d, o.Admitted)
	if d.Admit || record || recordMember {
		if d.Admit {
			adm.Machines = append(slices.Clone(adm.Machines), name)
		}
		if record {
			adm.Requests = maps.Clone(adm.Requests)
			if adm.Requests == nil {
				adm.Requests = map[string]Request{}
			}
			adm.Requests[name] = recorded
		}
		if recordMember {
			adm.Members = maps.Clone(adm.Members)
			if adm.Members == nil {
				adm.Members = map[string]Member{}
			}
			adm.Members[name] = member
		}
		if err := reboot.Fenced(ctx, r.Guard, "remediation: admit "+name, func(ctx context.Context) error {
			return r.Admissions.PutAdmissions(ctx, adm)
		}); err != nil {
			return res, fmt.Errorf("remediation: admit %s: %w", name, err)
		}
	}
	if d.UpdateState {
		if err := reboot.Fenced(ctx, r.Guard, "remediation: save state of "+name, func(ctx context.Context) error {
			return r.Machines.SaveState(ctx, name, rec.Version, d.State)
		}); err != nil {
			return res, fmt.Errorf("remediation: save state of %s: %w", name, err)
		}
	}
	steps := []struct {
		do  bool
		run func(ctx context.Context) error
		op  string
		// checked: the step acts on the host or the Node, so it runs only
		// if the persisted attempt is still the one decided (below).
		checked bool
	}{
		{d.AddRebootAnnotation, func(ctx context.Context) error { return r.Hosts.AddRebootAnnotation(ctx, name, attempt) }, "add reboot annotation", true},
		{d.DeleteNode, func(ctx context.Context) error { return r.Nodes.Delete(ctx, node.Name, node.UID) }, "delete node", true},
		{d.TaintNode, func(ctx context.Context) error { return r.Nodes.SetOutOfService(ctx, node.Name, true) }, "taint node", true},
		{d.RemoveRebootAnnotation, func(ctx context.Context) error { return r.removeRequest(ctx, name, req) }, "remove reboot annotation", true},
		{d.RemovePrevRequest || len(d.RemoveEarlierRequests) > 0, func(ctx context.Context) error {
			hosts := d.RemoveEarlierRequests
			if d.RemovePrevRequest {
				hosts = append([]string{rec.State.PrevHost}, hosts...)
			}
			for _, h := range hosts {
				if err := r.removePrev(ctx, name, h, rec.Machine.UID); err != nil {
					return fmt.Errorf("host %s it moved from: %w", h, err)
				}
			}
			return nil
		}, "remove reboot annotation from a host it moved from", true},
		{d.RestoreLabels != nil || d.RestoreAnnotations != nil, func(ctx context.Context) error {
			return r.Nodes.AddMetadata(ctx, d.RestoreNode, d.RestoreLabels, d.RestoreAnnotations)
		}, "restore node metadata", true},
		{d.RemoveTaint, func(ctx context.Context) error { return r.Nodes.SetOutOfService(ctx, d.RestoreNode, false) }, "untaint node", true},
		{d.RemoveNeedsRemediation, func(ctx context.Context) error { return r.Machines.RemoveNeedsRemediation(ctx, name) }, "remove needs-remediation", false},
		{d.DeleteMachine, func(ctx context.Context) error { return r.Machines.Delete(ctx, name) }, "delete machine", false},
		{d.Release, func(ctx context.Context) error { return r.release(ctx, name, &adm) }, "release admission", false},
	}
	// The side effects on the host and the Node are this pass's only if
	// the persisted attempt is still the one it decided: a pass paused
	// after its state write, superseded since by another leader's, writes
	// nothing (no reboot request of an attempt that is over).
	decided := stateAfter(rec.State, d)
	for _, s := range steps {
		if s.do {
			run := s.run
			if s.checked {
				run = func(ctx context.Context) error {
					if err := r.current(ctx, name, decided); err != nil {
						return err
					}
					// The read may have outlasted the Guard's lease.
					if err := live(ctx, r.Guard, "remediation: "+s.op+" for "+name); err != nil {
						return err
					}
					return s.run(ctx)
				}
			}
			if err := reboot.Fenced(ctx, r.Guard, "remediation: "+s.op+" for "+name, run); err != nil {
				return res, fmt.Errorf("remediation: %s for %s: %w", s.op, name, err)
			}
		}
	}
	if r.Logger != nil && (d.UpdateState || d.AddRebootAnnotation || d.RemoveRebootAnnotation || d.DeleteNode ||
		d.TaintNode || d.DeleteMachine || d.RemoveNeedsRemediation) {
		r.Logger.LogAttrs(ctx, slog.LevelInfo, "remediation decision", slog.String("machine", name),
			slog.String("phase", d.State.Phase.String()), slog.Int("attempt", d.State.Attempt), slog.String("reason", d.Reason))
	}
	return res, nil
}

// stateAfter is the state a pass leaves: d's if it saves one, else s.
func stateAfter(s State, d Decision) State {
	if d.UpdateState {
		return d.State
	}
	return s
}

// withGone adds to fleet the admitted Machines it does not list (deleted
// while their request may still hold their host off: their admission is
// kept until it is removed), each unhealthy and remediating in the
// cluster and health check, and with the control-plane role, recorded
// with its admission (Admissions.Members); a Machine admitted by a record
// without them counts in the candidate's cluster and health check, as a
// control-plane Machine (where it may have been).
func withGone(fleet []FleetMachine, adm Admissions, cand Machine) []FleetMachine {
	listed := make(map[string]bool, len(fleet))
	for _, m := range fleet {
		listed[m.Name] = true
	}
	for _, name := range adm.Machines {
		if !listed[name] {
			listed[name] = true
			g := FleetMachine{Name: name, Cluster: cand.Cluster, HealthCheck: cand.HealthCheck, ControlPlane: true, Unhealthy: true, Remediating: true}
			if m, ok := adm.Members[name]; ok {
				g.Cluster, g.HealthCheck, g.ControlPlane = m.Cluster, m.HealthCheck, m.ControlPlane
			}
			fleet = append(fleet, g)
		}
	}
	return withOthers(fleet, adm, cand)
}

// withOthers counts another controller's admissions (Admissions.Others)
// in fleet: each is a host under remediation where the candidate is, its
// member unknown, so each takes the place of a distinct healthy member of
// the candidate's cluster and health check other than the candidate
// (that Node may be the one it remediates: the member count stays, and
// the unhealthy count never falls short), and is added as a member of its
// own once none is left (named apart from this store's names, which they
// may equal). Either way it is a remediation in flight with the other's
// control-plane role (Admissions.OthersControlPlane; control plane if
// unknown), so the one-control-plane-at-a-time rule holds across both
// controllers.
func withOthers(fleet []FleetMachine, adm Admissions, cand Machine) []FleetMachine {
	if len(adm.Others) == 0 {
		return fleet
	}
	fleet = slices.Clone(fleet)
	key := func(m FleetMachine) string {
		if m.Node != "" {
			return "node/" + m.Node
		}
		return "machine/" + m.Name
	}
	busy := map[string]bool{key(FleetMachine{Name: cand.Name, Node: cand.NodeName}): true}
	for _, m := range fleet {
		busy[key(m)] = busy[key(m)] || m.Unhealthy || m.Remediating || m.Name == cand.Name
	}
	controlPlane := func(name string) bool {
		cp, ok := adm.OthersControlPlane[name]
		return cp || !ok
	}
	i := 0
	for _, name := range slices.Sorted(maps.Keys(adm.Others)) {
		for i < len(fleet) && (fleet[i].Cluster != cand.Cluster || fleet[i].HealthCheck != cand.HealthCheck || busy[key(fleet[i])]) {
			i++
		}
		if i < len(fleet) {
			// It stands for the other's remediation: counted, in flight,
			// with the other's control-plane role.
			busy[key(fleet[i])] = true
			fleet[i].Unhealthy, fleet[i].Remediating, fleet[i].ControlPlane = true, true, controlPlane(name)
			continue
		}
		fleet = append(fleet, FleetMachine{Name: "\x00other/" + name, Cluster: cand.Cluster, HealthCheck: cand.HealthCheck,
			ControlPlane: controlPlane(name), Unhealthy: true, Remediating: true})
		i = len(fleet)
	}
	return fleet
}

// memberOf returns the entry the admission record is to keep for m
// (Admissions.Members) after decision d, and whether it must be written:
// at admission (its scope, and whether a request is about to be
// written), and when an admitted Machine's request is about to be
// written or the hosts it moved from changed (State.PrevHost,
// PrevHostSince, PrevHostSeen, EarlierHosts: written before the state,
// step 1, so that a sighting is recorded there too before its request is
// removed). A host the state forgets stays in the entry until another
// replaces it: a Machine gone with it has a request found there removed.
func memberOf(adm Admissions, m Machine, d Decision, admitted bool) (Member, bool) {
	had, ok := adm.Members[m.Name]
	withPrev := func(e Member) Member {
		if d.State.PrevHost != "" || len(d.State.EarlierHosts) > 0 {
			e.PrevHost, e.PrevHostSince, e.PrevHostSeen = d.State.PrevHost, d.State.PrevHostSince, d.State.PrevHostSeen
			e.EarlierHosts = slices.Clone(d.State.EarlierHosts)
			return e
		}
		// Forgotten by the state: not off for a request found there.
		e.PrevHostSeen = time.Time{}
		e.EarlierHosts = slices.Clone(e.EarlierHosts)
		for i := range e.EarlierHosts {
			e.EarlierHosts[i].Seen = time.Time{}
		}
		return e
	}
	switch {
	case d.Admit:
		// Admitted while over (ownStray): a request of its was on its host.
		wrote := d.AddRebootAnnotation || !InFlight(d.State.Phase)
		return withPrev(Member{Cluster: m.Cluster, HealthCheck: m.HealthCheck, ControlPlane: m.ControlPlane, Wrote: wrote}), true
	case !admitted:
		return had, false
	}
	next := had
	if !ok {
		next = Member{Cluster: m.Cluster, HealthCheck: m.HealthCheck, ControlPlane: m.ControlPlane}
	}
	next.Wrote = next.Wrote || d.AddRebootAnnotation
	next = withPrev(next)
	if !ok && !d.AddRebootAnnotation && next.PrevHost == "" && len(next.EarlierHosts) == 0 {
		return had, false // an earlier version's record: nothing new to say
	}
	return next, !ok || !next.Equal(had)
}

// abandon ends the remediation of a Machine that is gone: while it is
// admitted (its remediation may hold its host off), its reboot request is
// removed from the host it was written to, as the admission record keeps
// it (Admissions.Requests: its State, and State.Host with it, went with
// the Machine), whatever HostOf answers now, when the HostStore is a
// RequestRemover (only a value of this Machine's is removed); else, or
// for a record without it, from the host the HostStore resolves for it
// now (HostOf must then keep answering for a deleted Machine until its
// admission is released), so that the reboot controller powers the host
// on; the admission is released only once that host is no longer held
// (else ErrHostHeld), or at once if the record says no request was
// written (Member.Wrote). A HostStore that says the Machine has no host
// (ErrNotFound) while the record names no request (an old record) has
// the requests no existing Machine owns removed first (RequestFinder),
// one per pass, each recorded as its request before it is removed
// (sweepOrphan), the admission kept until a pass finds none left and the
// last recorded one's host not held, else the admission is kept
// (ErrOrphanRequest); a HostStore that is a RequestFinder has them swept
// likewise once a recorded request's host is no longer held (a request
// of its may be on a host no record names); any other error keeps
// the admission, and the pass is retried.
func (r *Reconciler) abandon(ctx context.Context, name string) error {
	if r.Admissions == nil {
		return nil
	}
	a, err := r.Admissions.GetAdmissions(ctx)
	if err != nil {
		return fmt.Errorf("remediation: admissions: %w", err)
	}
	if !a.Has(name) {
		return nil
	}
	return r.releaseRecorded(ctx, name, a, "it is gone")
}

// ownRequest reports whether the recorded request req is the one of the
// Machine with UID uid (a value naming no Machine is taken as its).
func ownRequest(req Request, uid string) bool {
	owner, ok := requestOwner(req.Value)
	return !ok || owner == uid
}

// releaseRecorded removes the request the admission record a keeps for
// name from its host, then releases name's admission once that host is
// not held (held: the request is gone and the host is not off after it
// without being powered on since, read through the recorded request,
// RequestReader), as a live Machine's admission is kept (see abandon);
// an admission whose Member says no request was written is released at
// once. The hosts the Machine moved from (Member.PrevHost,
// Member.EarlierHosts) are read as a live Machine's are (readPrev): a
// request of the Machine's found on one is recorded in its Member
// (Seen) before it is removed, and the admission is kept while such a
// host may still be off for a request found there (offFor, read for the
// time the Machine moved away from it); a host off for another
// Machine's request only holds nothing. why says whose request it is,
// for the error.
func (r *Reconciler) releaseRecorded(ctx context.Context, name string, a Admissions, why string) error {
	req := a.Requests[name]
	mem, hasMem := a.Members[name]
	if hasMem && !mem.Wrote && req.Value == "" {
		// Admitted with no host: no request was ever written.
		return reboot.Fenced(ctx, r.Guard, "remediation: release "+name, func(ctx context.Context) error { return r.release(ctx, name, nil) })
	}
	prevs, found, off, err := r.readMembersPrev(ctx, name, a, req, mem)
	if err != nil {
		return fmt.Errorf("remediation: machine %s (%s): %w", name, why, err)
	}
	err = reboot.Fenced(ctx, r.Guard, "remediation: remove reboot annotation for "+name, func(ctx context.Context) error {
		if rr, ok := r.Hosts.(RequestRemover); ok && req.Host != "" {
			if err := rr.RemoveRebootRequest(ctx, name, req); err != nil {
				return err
			}
			uid, _ := requestOwner(req.Value)
			for i, e := range prevs {
				if found[i] {
					if err := live(ctx, r.Guard, "remediation: remove reboot annotation from host "+e.Host+" for "+name); err != nil {
						return err
					}
					if err := rr.RemoveRebootRequest(ctx, name, Request{Value: RebootValue(uid, time.Time{}), Host: e.Host}); err != nil {
						return err
					}
				}
			}
			return nil
		}
		return r.Hosts.RemoveRebootAnnotation(ctx, name)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remediation: machine %s (%s): remove its reboot request before releasing its admission: %w", name, why, err)
	}
	if held, err := r.stillHeld(ctx, name, req); err != nil || held {
		if err == nil {
			err = ErrHostHeld
		}
		return fmt.Errorf("remediation: machine %s (%s): host %s: %w", name, why, req.Host, err)
	}
	if req.Host != "" || errors.Is(err, ErrNotFound) {
		// No recorded request and no host the HostStore resolves (an
		// old record), or a recorded request (perhaps by an earlier
		// pass's sweep) now not held: a request of its may still be on
		// a host no record names. One request no Machine owns is
		// recorded as its and removed per pass, under the Guard (a
		// deposed leader's stale Machine list removes nothing), and
		// the admission kept; it is released only by a pass that finds
		// none left.
		var o Request
		var found bool
		serr := reboot.Fenced(ctx, r.Guard, "remediation: remove the reboot requests no Machine owns for "+name, func(ctx context.Context) error {
			var err error
			o, found, err = r.sweepOrphan(ctx, name, req.Host == "")
			return err
		})
		if serr != nil {
			return fmt.Errorf("remediation: machine %s (%s): %w", name, why, serr)
		}
		if found {
			return fmt.Errorf("remediation: machine %s (%s): host %s, where a request no Machine owns was recorded as its and removed: %w", name, why, o.Host, ErrHostHeld)
		}
	}
	for i, e := range prevs {
		if found[i] || off[i] {
			// A request of its found there (removed above: read again on
			// the next pass), or the host may still be off for one.
			what := "which may still be off for a request of its found there"
			if found[i] {
				what = "where a request of its was found (removed)"
			}
			return fmt.Errorf("remediation: machine %s (%s): host %s it moved from, %s: %w", name, why, e.Host, what, ErrHostHeld)
		}
	}
	return reboot.Fenced(ctx, r.Guard, "remediation: release "+name, func(ctx context.Context) error { return r.release(ctx, name, nil) })
}

// readMembersPrev reads, for name's admission (request req, Member mem),
// each host it moved from: whether a request of the Machine's is on it
// (found), and whether it may be off for one found there (off: Seen set
// and offFor, read for the time it moved away). A sighting not recorded
// yet is recorded in the Member (Seen, a compare-and-swap write of the
// admission record) before anything is removed. Nothing without a
// RequestRemover, or for a request that names no Machine.
func (r *Reconciler) readMembersPrev(ctx context.Context, name string, a Admissions, req Request, mem Member) (prevs []MovedFrom, found, off []bool, err error) {
	uid, ok := requestOwner(req.Value)
	if _, rr := r.Hosts.(RequestRemover); !ok || !rr {
		return nil, nil, nil, nil
	}
	all := mem.movedFrom(req.At)
	changed := false
	for i, e := range all {
		if e.Host == req.Host {
			continue // the request's own host: read for the request
		}
		h, err := r.readRecorded(ctx, name, Request{Value: RebootValue(uid, time.Time{}), At: e.Since, Host: e.Host})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, nil, nil, fmt.Errorf("read host %s it moved from: %w", e.Host, err)
		}
		if err == nil && e.Since.Equal(knownEarliest) && !h.RebootAnnotation && h.OnConfirmedAt.After(e.Since) {
			// No time recorded (Member.movedFrom): a request of the
			// Machine's the reboot controller acted on was ended by a
			// power-on no later than the one it confirmed On, so the
			// host is read from that power-on, not from any time (a
			// later power-off, another's or its owner's, is not this
			// Machine's to count).
			h, err = r.readRecorded(ctx, name, Request{Value: RebootValue(uid, time.Time{}), At: h.OnConfirmedAt, Host: e.Host})
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, nil, nil, fmt.Errorf("read host %s it moved from: %w", e.Host, err)
			}
		}
		if h.RebootAnnotation && e.Seen.IsZero() {
			all[i].Seen, changed = r.Now(), true
		}
		prevs = append(prevs, all[i])
		found = append(found, h.RebootAnnotation)
		off = append(off, !all[i].Seen.IsZero() && !e.Since.IsZero() && offFor(h))
	}
	if changed {
		var st State
		setMovedFrom(&st, all)
		next := mem
		next.PrevHost, next.PrevHostSince, next.PrevHostSeen, next.EarlierHosts = st.PrevHost, st.PrevHostSince, st.PrevHostSeen, st.EarlierHosts
		a.Members = maps.Clone(a.Members)
		a.Members[name] = next
		if err := reboot.Fenced(ctx, r.Guard, "remediation: record a request found on a host "+name+" moved from", func(ctx context.Context) error {
			return r.Admissions.PutAdmissions(ctx, a)
		}); err != nil {
			return nil, nil, nil, fmt.Errorf("record a request of its found on a host it moved from: %w", err)
		}
	}
	return prevs, found, off, nil
}

// stillHeld reports whether the host of the recorded request req of
// name (a Machine that is gone, or an earlier Machine of its name) is
// still held for it (held: the request on it, a reboot pending, or off
// after it and not known on since), read through req.Host
// (RequestReader) since HostOf no longer answers for the Machine; without
// a RequestReader, through the Machine's mapping, a Machine it does not
// resolve (ErrNotFound) holding nothing it can tell. A record without a
// request (written before Admissions.Requests existed) holds nothing it
// can tell either. A recorded request without a time (a failed
// remediation cleared: LastRequest has no T) is read for any time
// (knownEarliest), as Member.movedFrom reads a host it moved from: a
// late write of the Machine's may have landed on the host and had it
// powered off (TestReviewSgab_GoneNoTimeOwnHostStrayReleasedWhileOff);
// with no request on it, it is read again from the reboot controller's
// last confirmed power-on (Host.OnConfirmedAt), as readMembersPrev does.
func (r *Reconciler) stillHeld(ctx context.Context, name string, req Request) (bool, error) {
	if req.Value == "" {
		return false, nil
	}
	noTime := req.At.IsZero()
	if noTime {
		req.At = knownEarliest
	}
	h, err := r.readRecorded(ctx, name, req)
	if err == nil && noTime && !h.RebootAnnotation && h.OnConfirmedAt.After(req.At) {
		req.At = h.OnConfirmedAt
		h, err = r.readRecorded(ctx, name, req)
	}
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the host for its last request before releasing its admission: %w", err)
	}
	return held(h), nil
}

// sweepOrphan records, for name (gone, or replaced by a Machine of its
// name; its recorded request removed and not held, or none recorded and
// no host the HostStore resolves), one reboot request no existing Machine owns (RequestFinder: a
// value naming a UID that no Machine of MachineStore.List has) as name's
// request (Admissions.Requests, a compare-and-swap write, replacing the
// one recorded before, which is removed and not held), then removes it
// from its host: later passes read its host for it as for any recorded
// request (stillHeld), and the admission is kept meanwhile. A request
// recorded as another admission's is left to that Machine's own pass. It
// reports whether one was found (none: nothing left to sweep). The T
// recorded is the one its value carries, or, if none or one ahead of
// this clock (a replica's clock running ahead), knownEarliest: never
// now. Without a RequestFinder it fails with ErrOrphanRequest if must
// (no request recorded, so one may be left), else finds none. The
// caller runs it under the Guard (reboot.Fenced): ctx is the hold's,
// and it is checked before each write (the reads may outlast the
// lease).
func (r *Reconciler) sweepOrphan(ctx context.Context, name string, must bool) (Request, bool, error) {
	f, ok := r.Hosts.(RequestFinder)
	rr, ok2 := r.Hosts.(RequestRemover)
	if !ok || !ok2 {
		if !must {
			return Request{}, false, nil
		}
		return Request{}, false, fmt.Errorf("remediation: machine %s: %w", name, ErrOrphanRequest)
	}
	reqs, err := f.RebootRequests(ctx)
	if err != nil {
		return Request{}, false, fmt.Errorf("remediation: machine %s: find its reboot request: %w", name, err)
	}
	all, err := r.Machines.List(ctx)
	if err != nil {
		return Request{}, false, fmt.Errorf("remediation: machine %s: find its reboot request: list machines: %w", name, err)
	}
	a, err := r.Admissions.GetAdmissions(ctx)
	if err != nil {
		return Request{}, false, fmt.Errorf("remediation: machine %s: admissions: %w", name, err)
	}
	if !a.Has(name) {
		return Request{}, false, nil
	}
	owned := make(map[string]bool, len(all))
	for _, m := range all {
		owned[m.Machine.UID] = true
	}
	now := r.Now()
	for _, req := range reqs {
		if owner, ok := requestOwner(req.Value); !ok || owned[owner] || req.Host == "" || recordedByOther(a, name, req) {
			continue
		}
		req.At = RequestTime(req.Value)
		if req.At.IsZero() || !req.At.Before(now) {
			req.At = knownEarliest
		}
		a.Requests = maps.Clone(a.Requests)
		if a.Requests == nil {
			a.Requests = map[string]Request{}
		}
		a.Requests[name] = req
		if err := live(ctx, r.Guard, "remediation: record the request no Machine owns on host "+req.Host+" for "+name); err != nil {
			return Request{}, false, err
		}
		if err := r.Admissions.PutAdmissions(ctx, a); err != nil {
			return Request{}, false, fmt.Errorf("remediation: machine %s: record the request no Machine owns on host %s before removing it: %w", name, req.Host, err)
		}
		if err := live(ctx, r.Guard, "remediation: remove the request no Machine owns on host "+req.Host+" for "+name); err != nil {
			return Request{}, false, err
		}
		if err := rr.RemoveRebootRequest(ctx, name, req); err != nil {
			return Request{}, false, fmt.Errorf("remediation: machine %s: remove the request no Machine owns on host %s: %w", name, req.Host, err)
		}
		return req, true, nil
	}
	return Request{}, false, nil
}

// recordedByOther reports whether req (found on req.Host) is the
// request a recorded for another admitted Machine than name.
func recordedByOther(a Admissions, name string, req Request) bool {
	for m, o := range a.Requests {
		if m != name && a.Has(m) && o.Host == req.Host && o.Value == req.Value {
			return true
		}
	}
	return false
}

// ErrHostHeld: the admission of a Machine that is gone (or replaced by
// one of the same name) is kept because the host its last request was
// written to is still held for it (held: a reboot pending on it, or off
// after the request and not powered on since): the pass is retried until
// the reboot controller powered it on and, where its evidence needs it,
// read it On. Unknown errs towards holding: a BMC that refuses power-ons,
// or reads Transitioning for ever, holds the admission for ever, whether
// or not the host is on (TestReviewSgab_StuckTransitioningOnHostHeldForEver);
// the message says what ends it.
var ErrHostHeld = errors.New("remediation: its host is still held after its reboot request (kept admitted, and counted by the storm guard, until the reboot controller powers it on and reads it On; if its BMC refuses power-ons or keeps reading a power state other than On or Off, fix the BMC, or power the host on by hand; once you have checked the host is on, or kept off by its owner for no request of this Machine's, removing the Machine's name from the admission record releases it)")

// RequestReader is an optional ability of a HostStore that names hosts:
// it reads the host req.Host for the request req as HostStore.Get does,
// without asking the Machine's mapping (the Machine may be gone); a host
// the store no longer has reads as Missing. The Reconciler uses it to
// keep a gone Machine's admission while its host is held (RebootAPIHosts has
// it); without it, HostStore.Get is asked, and a Machine it cannot
// resolve (ErrNotFound) is released once its request is removed.
type RequestReader interface {
	ReadRequest(ctx context.Context, machine string, req Request) (Host, error)
}

// readRecorded reads req's host for the request req of a Machine that may
// be gone (RequestReader, else HostStore.Get).
func (r *Reconciler) readRecorded(ctx context.Context, name string, req Request) (Host, error) {
	if rr, ok := r.Hosts.(RequestReader); ok {
		return rr.ReadRequest(ctx, name, req)
	}
	return r.Hosts.Get(ctx, name, req)
}

// readPrev reads each host rec's Machine moved from (State.PrevHost,
// State.EarlierHosts; not the one its request is on) into o: whether a
// request of the Machine's is on it, and whether it may be off for one a
// pass found there (MovedFrom.Seen set, or found by this pass: offFor,
// read for the time it moved away, MovedFrom.Since). A host off for another Machine's request
// only (no request of this one's ever found there since the move) is not
// this Machine's to count.
func (r *Reconciler) readPrev(ctx context.Context, rec MachineRecord, o *Observed) error {
	if _, ok := r.Hosts.(RequestRemover); !ok || rec.Machine.UID == "" {
		return nil
	}
	read := func(e MovedFrom) (PrevReading, error) {
		if e.Host == "" || e.Host == rec.State.Host {
			return PrevReading{}, nil
		}
		h, err := r.readRecorded(ctx, rec.Machine.Name, Request{Value: RebootValue(rec.Machine.UID, time.Time{}), At: e.Since, Host: e.Host})
		if err != nil {
			return PrevReading{}, fmt.Errorf("remediation: host %s that machine %s moved from: %w", e.Host, rec.Machine.Name, err)
		}
		// A request found by this pass counts as a sighting already (it
		// is recorded before it is removed), and as the host off whether
		// or not the reboot controller acted on it yet (it may power the
		// host off before the pass removes it): the pass that finds it
		// does not write a request elsewhere meanwhile.
		seen := !e.Seen.IsZero() || h.RebootAnnotation
		return PrevReading{Request: h.RebootAnnotation, Off: h.RebootAnnotation || seen && !e.Since.IsZero() && offFor(h)}, nil
	}
	for i, e := range movedFrom(rec.State) {
		p, err := read(e)
		if err != nil {
			return err
		}
		if i == 0 && rec.State.PrevHost != "" {
			o.PrevHostRequest, o.PrevHostOff = p.Request, p.Off
			continue
		}
		o.EarlierHosts = append(o.EarlierHosts, p)
	}
	return nil
}

// removePrev removes a request of the Machine with UID uid from prev (a
// host it moved from).
func (r *Reconciler) removePrev(ctx context.Context, name, prev, uid string) error {
	rr, ok := r.Hosts.(RequestRemover)
	if !ok || prev == "" || uid == "" {
		return nil
	}
	return rr.RemoveRebootRequest(ctx, name, Request{Value: RebootValue(uid, time.Time{}), Host: prev})
}

// removeRequest removes the reboot request req from its host (req.Host
// when the HostStore is a RequestRemover, else the one it resolves). A
// request of the Machine's on a host it moved from is removed only by
// the pass that found it, after its state recorded that (prevHost).
func (r *Reconciler) removeRequest(ctx context.Context, name string, req Request) error {
	if rr, ok := r.Hosts.(RequestRemover); ok {
		return rr.RemoveRebootRequest(ctx, name, req)
	}
	return r.Hosts.RemoveRebootAnnotation(ctx, name)
}

// current reads the Machine's persisted state again (MachineStore.Get,
// which must read the authority, not a cache that may lag) and fails with
// ErrConflict unless it is still decided: another pass (another leader's)
// wrote since, and this pass's view no longer holds.
func (r *Reconciler) current(ctx context.Context, name string, decided State) error {
	rec, err := r.Machines.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("remediation: machine %s: check the persisted attempt: %w", name, err)
	}
	if !rec.State.Equal(decided) {
		return fmt.Errorf("remediation: machine %s: superseded (its persisted state changed since this pass decided): %w", name, ErrConflict)
	}
	return nil
}

// live checks, right before a write that follows a read in the same
// fenced call, that ctx (the Guard's, bounded by its lease) has not ended:
// a pass paused in the read finds its lease over, and writes nothing.
// Without a Guard it reports ctx's own end.
func live(ctx context.Context, g reboot.Guard, what string) error {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case g != nil:
		return fmt.Errorf("%s: %w: %w", what, reboot.ErrNotLeader, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// nodeName is the Machine's Node, or the backed-up one.
func nodeName(rec MachineRecord) string {
	if rec.Machine.NodeName != "" {
		return rec.Machine.NodeName
	}
	if rec.State.Backup != nil {
		return rec.State.Backup.Name
	}
	return ""
}

// release removes machine from the admission record (read again if adm is
// nil or stale), retrying conflicts a few times.
func (r *Reconciler) release(ctx context.Context, machine string, adm *Admissions) error {
	if r.Admissions == nil {
		return nil
	}
	for i := 0; i < 5; i++ {
		if adm == nil || i > 0 {
			a, err := r.Admissions.GetAdmissions(ctx)
			if err != nil {
				return err
			}
			adm = &a
		}
		if !adm.Has(machine) {
			return nil
		}
		next := *adm
		next.Machines = slices.DeleteFunc(slices.Clone(adm.Machines), func(m string) bool { return m == machine })
		if _, ok := adm.Requests[machine]; ok {
			next.Requests = maps.Clone(adm.Requests)
			delete(next.Requests, machine)
		}
		if _, ok := adm.Members[machine]; ok {
			next.Members = maps.Clone(adm.Members)
			delete(next.Members, machine)
		}
		if err := live(ctx, r.Guard, "remediation: release "+machine); err != nil {
			return err
		}
		err := r.Admissions.PutAdmissions(ctx, next)
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("remediation: release %s: %w", machine, ErrConflict)
}

func (r *Reconciler) table(ctx context.Context, rec MachineRecord, node Node, host Host) (Result, error) {
	in := TableInput{NodeRef: node.Exists, NeedsRemediation: rec.Machine.NeedsRemediation,
		PoweredOn: host.Power != power.StateOff, RebootAnnotation: host.RebootAnnotation}
	a := Table(in)
	var err error
	if a != TableNothing {
		err = reboot.Fenced(ctx, r.Guard, "remediation: table "+a.String()+" for "+rec.Machine.Name, func(ctx context.Context) error {
			return r.tableAct(ctx, a, rec, node)
		})
	}
	if err != nil {
		return Result{TableAction: a}, fmt.Errorf("remediation: table %s for %s: %w", a, rec.Machine.Name, err)
	}
	return Result{TableAction: a, RequeueAfter: r.Config.withDefaults().PollInterval, Busy: tableBusy(a, in)}, nil
}

// tableAct applies the table's action a.
func (r *Reconciler) tableAct(ctx context.Context, a TableAction, rec MachineRecord, node Node) error {
	var err error
	switch a {
	case TableAddRebootAnnotation:
		now := r.Now()
		err = r.Hosts.AddRebootAnnotation(ctx, rec.Machine.Name, Request{Value: RebootValue(rec.Machine.UID, now), At: now})
	case TableDeleteNode:
		err = r.Nodes.Delete(ctx, node.Name, node.UID)
	case TableRemoveNeedsRemediation:
		err = r.Machines.RemoveNeedsRemediation(ctx, rec.Machine.Name)
	case TableRemoveRebootAnnotation:
		err = r.Hosts.RemoveRebootAnnotation(ctx, rec.Machine.Name)
	}
	return err
}
