package remediation

import (
	"context"
	"errors"
	"fmt"
	"maps"
)

// Record is one record of an inventory where the machine and its node are
// one thing (a server of your own, no Cluster API): what a remediation
// reads and writes of it. RecordStore holds them; Records adapts it to the
// Reconciler's MachineStore and NodeStore.
type Record struct {
	// Name names the server (it is the Machine's and the Node's name).
	Name string
	// Group scopes the storm guard (Limit): at most the limit of one
	// group is remediated at once (Machine.Cluster).
	Group string
	// ControlPlane: at most one such server is remediated at once.
	ControlPlane bool
	// Unhealthy is your health check's verdict: the server needs
	// remediation (Machine.NeedsRemediation). The remediation clears it
	// once the server is back and Ready.
	Unhealthy bool
	// Ready: the server's workload is up again after a reboot (Node.Ready).
	Ready bool
	// OutOfService: the server's workloads are being moved elsewhere (the
	// remediation sets it once the host is fenced, and clears it after).
	OutOfService bool
	// Labels and Annotations are kept across the remediation.
	Labels, Annotations map[string]string
	// State is the remediation's persisted state (store it as it is given).
	State State
	// Version is the store's version, for compare-and-swap.
	Version string
}

// RecordStore is an inventory of Records: three methods instead of the
// eleven of MachineStore and NodeStore.
type RecordStore interface {
	// Get returns the record or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)
	// List returns every record (for the storm guard).
	List(ctx context.Context) ([]Record, error)
	// Update writes r's Unhealthy, OutOfService, Labels, Annotations and
	// State if r.Version is current (else an error wrapping ErrConflict),
	// and returns the record with its new version. It writes nothing once
	// ctx has ended: it checks ctx.Err() just before it writes, as
	// MachineStore says.
	Update(ctx context.Context, r Record) (Record, error)
}

// ErrNotDeletable: the single-record adapter was asked to delete a record
// (run its Reconciler with Config.OutOfService, which never asks).
var ErrNotDeletable = errors.New("remediation: a single record is not deleted (set Config.OutOfService)")

// Records adapts a RecordStore to the Reconciler's MachineStore and
// NodeStore. Run the Reconciler with Config.OutOfService (the server's
// workloads are moved by its OutOfService flag; a record is never deleted)
// and with RebootAPIHosts mapping a record's name to its host. The Machine it
// shows has no controller owner, so escalation fails the remediation and
// never deletes anything. The MachineStore is a MachineWatcher when s is
// a RecordWatcher (Reconciler.Loop then wakes a record at once when it
// changes; else it lists the records once every Config.PollInterval).
func Records(s RecordStore) (MachineStore, NodeStore) {
	if w, ok := s.(RecordWatcher); ok {
		return watchingRecordMachines{recordMachines{s}, w}, recordNodes{s}
	}
	return recordMachines{s}, recordNodes{s}
}

// RecordStoreOf returns the RecordStore behind a MachineStore or NodeStore
// that Records returned, and false for any other store: for conformance
// kits (remediationtest.Contract) that check the RecordStore's own
// compare-and-swap, which the adapter's sequential calls cannot show.
func RecordStoreOf(store any) (RecordStore, bool) {
	switch s := store.(type) {
	case recordMachines:
		return s.s, true
	case watchingRecordMachines:
		return s.s, true
	case recordNodes:
		return s.s, true
	}
	return nil, false
}

type recordMachines struct{ s RecordStore }

func machineOf(r Record) MachineRecord {
	return MachineRecord{Machine: Machine{Name: r.Name, UID: r.Name, NodeName: r.Name, Cluster: r.Group,
		ControlPlane: r.ControlPlane, NeedsRemediation: r.Unhealthy}, State: r.State, Version: r.Version}
}

func (m recordMachines) Get(ctx context.Context, name string) (MachineRecord, error) {
	r, err := m.s.Get(ctx, name)
	if err != nil {
		return MachineRecord{}, err
	}
	return machineOf(r), nil
}

func (m recordMachines) List(ctx context.Context) ([]MachineRecord, error) {
	rs, err := m.s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MachineRecord, len(rs))
	for i, r := range rs {
		out[i] = machineOf(r)
	}
	return out, nil
}

func (m recordMachines) SaveState(ctx context.Context, name, version string, st State) error {
	r, err := m.s.Get(ctx, name)
	if err != nil {
		return err
	}
	if r.Version != version {
		return fmt.Errorf("remediation: record %s changed since it was read: %w", name, ErrConflict)
	}
	r.State = st
	if err := ctx.Err(); err != nil { // the read outlasted the caller's (the Guard's) deadline
		return fmt.Errorf("remediation: record %s: %w", name, err)
	}
	_, err = m.s.Update(ctx, r)
	return err
}

func (m recordMachines) RemoveNeedsRemediation(ctx context.Context, name string) error {
	return change(ctx, m.s, name, func(r *Record) bool {
		was := r.Unhealthy
		r.Unhealthy = false
		return was
	})
}

func (m recordMachines) Delete(_ context.Context, name string) error {
	return fmt.Errorf("remediation: record %s: %w", name, ErrNotDeletable)
}

type recordNodes struct{ s RecordStore }

func (n recordNodes) Get(ctx context.Context, name string) (Node, error) {
	r, err := n.s.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return Node{Name: name}, nil
	}
	if err != nil {
		return Node{}, err
	}
	return Node{Exists: true, Name: r.Name, UID: r.Name, Ready: r.Ready, OutOfService: r.OutOfService,
		Labels: maps.Clone(r.Labels), Annotations: maps.Clone(r.Annotations)}, nil
}

func (n recordNodes) Delete(_ context.Context, name, _ string) error {
	return fmt.Errorf("remediation: record %s: %w", name, ErrNotDeletable)
}

func (n recordNodes) SetOutOfService(ctx context.Context, name string, on bool) error {
	return change(ctx, n.s, name, func(r *Record) bool {
		was := r.OutOfService
		r.OutOfService = on
		return was != on
	})
}

func (n recordNodes) AddMetadata(ctx context.Context, name string, labels, annotations map[string]string) error {
	return change(ctx, n.s, name, func(r *Record) bool {
		changed := false
		add := func(dst *map[string]string, src map[string]string) {
			for k, v := range src {
				if _, ok := (*dst)[k]; !ok {
					if *dst == nil {
						*dst = map[string]string{}
					}
					(*dst)[k] = v
					changed = true
				}
			}
		}
		r.Labels, r.Annotations = maps.Clone(r.Labels), maps.Clone(r.Annotations)
		add(&r.Labels, labels)
		add(&r.Annotations, annotations)
		return changed
	})
}

// change reads, changes (false: nothing to write) and writes a record,
// again on a conflict (these writes do not depend on what else changed).
func change(ctx context.Context, s RecordStore, name string, f func(r *Record) bool) error {
	var err error
	for i := 0; i < 10; i++ {
		var r Record
		if r, err = s.Get(ctx, name); err != nil {
			return err
		}
		if !f(&r) {
			return nil
		}
		if err := ctx.Err(); err != nil { // the read outlasted the caller's (the Guard's) deadline
			return fmt.Errorf("remediation: record %s: %w", name, err)
		}
		if _, err = s.Update(ctx, r); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return err
}
