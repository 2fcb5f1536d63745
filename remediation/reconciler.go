package remediation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rebootkit/rebootkit/power"
	"time"
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

// MachineStore reads and writes Machines.
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

// NodeStore reads and changes Nodes.
type NodeStore interface {
	// Get returns the Node; Exists is false if there is none (no error).
	Get(ctx context.Context, name string) (Node, error)
	// Delete deletes the Node; deleting a missing Node succeeds.
	Delete(ctx context.Context, name string) error
	// SetOutOfService adds (on) or removes OutOfServiceTaint with effect
	// NoExecute.
	SetOutOfService(ctx context.Context, name string, on bool) error
	// AddMetadata adds labels and annotations the Node lacks.
	AddMetadata(ctx context.Context, name string, labels, annotations map[string]string) error
}

// HostStore reads a Machine's host and changes its reboot annotation.
type HostStore interface {
	// Get returns the host of the Machine.
	Get(ctx context.Context, machine string) (Host, error)
	// AddRebootAnnotation sets RebootAnnotation to value.
	AddRebootAnnotation(ctx context.Context, machine, value string) error
	// RemoveRebootAnnotation removes RebootAnnotation (absent is fine).
	RemoveRebootAnnotation(ctx context.Context, machine string) error
}

// Reconciler applies phased decisions (or, with Table, the seed's truth
// table) for Machines.
type Reconciler struct {
	Machines MachineStore
	Nodes    NodeStore
	Hosts    HostStore
	// Config tunes phased decisions.
	Config Config
	// Limit is the storm guard's limit on unhealthy machines.
	Limit Limit
	// Table selects the seed's stateless table instead of the phased mode.
	// It loops under a health checker that re-adds its annotation; it
	// exists to reproduce the seed.
	Table bool
	// Now is the controller's clock.
	Now func() time.Time
	// Logger, if set, gets one line per pass that does something.
	Logger *slog.Logger
}

// Result is what a pass decided.
type Result struct {
	Decision     Decision
	TableAction  TableAction
	RequeueAfter time.Duration
}

// Reconcile runs one pass for the named Machine.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	rec, err := r.Machines.Get(ctx, name)
	if err != nil {
		return Result{}, fmt.Errorf("remediation: machine %s: %w", name, err)
	}
	host, err := r.Hosts.Get(ctx, name)
	if err != nil {
		return Result{}, fmt.Errorf("remediation: host of %s: %w", name, err)
	}
	node := Node{}
	if rec.Machine.NodeName != "" {
		if node, err = r.Nodes.Get(ctx, rec.Machine.NodeName); err != nil {
			return Result{}, fmt.Errorf("remediation: node of %s: %w", name, err)
		}
	}
	if r.Table {
		return r.table(ctx, rec, node, host)
	}

	may := false
	if rec.Machine.NeedsRemediation && !InFlight(rec.State.Phase) {
		all, err := r.Machines.List(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("remediation: list machines: %w", err)
		}
		fleet := make([]FleetMachine, len(all))
		for i, m := range all {
			fleet[i] = FleetMachine{Name: m.Machine.Name, ControlPlane: m.Machine.ControlPlane,
				Unhealthy: m.Machine.NeedsRemediation, Remediating: InFlight(m.State.Phase)}
		}
		may, _ = MayStart(fleet, name, r.Limit)
	}
	d := r.Config.Decide(Observed{Machine: rec.Machine, Node: node, Host: host, State: rec.State, MayStart: may}, r.Now())
	res := Result{Decision: d, RequeueAfter: d.RequeueAfter}
	if d.UpdateState {
		if err := r.Machines.SaveState(ctx, name, rec.Version, d.State); err != nil {
			return res, fmt.Errorf("remediation: save state of %s: %w", name, err)
		}
	}
	steps := []struct {
		do  bool
		run func() error
		op  string
	}{
		{d.AddRebootAnnotation, func() error { return r.Hosts.AddRebootAnnotation(ctx, name, d.RebootValue) }, "add reboot annotation"},
		{d.DeleteNode, func() error { return r.Nodes.Delete(ctx, node.Name) }, "delete node"},
		{d.TaintNode, func() error { return r.Nodes.SetOutOfService(ctx, node.Name, true) }, "taint node"},
		{d.RemoveRebootAnnotation, func() error { return r.Hosts.RemoveRebootAnnotation(ctx, name) }, "remove reboot annotation"},
		{d.RestoreLabels != nil || d.RestoreAnnotations != nil, func() error {
			return r.Nodes.AddMetadata(ctx, node.Name, d.RestoreLabels, d.RestoreAnnotations)
		}, "restore node metadata"},
		{d.RemoveTaint, func() error { return r.Nodes.SetOutOfService(ctx, node.Name, false) }, "untaint node"},
		{d.RemoveNeedsRemediation, func() error { return r.Machines.RemoveNeedsRemediation(ctx, name) }, "remove needs-remediation"},
		{d.DeleteMachine, func() error { return r.Machines.Delete(ctx, name) }, "delete machine"},
	}
	for _, s := range steps {
		if s.do {
			if err := s.run(); err != nil {
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

func (r *Reconciler) table(ctx context.Context, rec MachineRecord, node Node, host Host) (Result, error) {
	a := Table(TableInput{NodeRef: node.Exists, NeedsRemediation: rec.Machine.NeedsRemediation,
		PoweredOn: host.Power != power.StateOff, RebootAnnotation: host.RebootAnnotation})
	var err error
	switch a {
	case TableAddRebootAnnotation:
		err = r.Hosts.AddRebootAnnotation(ctx, rec.Machine.Name, RebootValue(rec.Machine.UID))
	case TableDeleteNode:
		err = r.Nodes.Delete(ctx, node.Name)
	case TableRemoveNeedsRemediation:
		err = r.Machines.RemoveNeedsRemediation(ctx, rec.Machine.Name)
	case TableRemoveRebootAnnotation:
		err = r.Hosts.RemoveRebootAnnotation(ctx, rec.Machine.Name)
	}
	if err != nil {
		return Result{TableAction: a}, fmt.Errorf("remediation: table %s for %s: %w", a, rec.Machine.Name, err)
	}
	return Result{TableAction: a, RequeueAfter: r.Config.withDefaults().PollInterval}, nil
}
