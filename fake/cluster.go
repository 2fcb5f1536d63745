package fake

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/remediation"
)

// Compile-time checks.
var (
	_ remediation.MachineStore   = (*Cluster)(nil)
	_ remediation.NodeStore      = (*ClusterNodes)(nil)
	_ remediation.AdmissionStore = (*Cluster)(nil)
	_ remediation.MachineWatcher = (*Cluster)(nil)
)

// Cluster is an in-memory set of Machines and Nodes, with versions for
// optimistic concurrency and hooks that let a test check invariants at the
// moment of each change. Use Nodes() for its remediation.NodeStore. Not for
// production.
type Cluster struct {
	mu       sync.Mutex
	machines map[string]remediation.MachineRecord
	nodes    map[string]remediation.Node
	version  int
	// BeforeNodeFence, if set, is called (without the lock) before a Node
	// is deleted or tainted out-of-service, with its name. Set it before
	// the cluster is in use.
	BeforeNodeFence func(node string)
	deleted         []string
	between         interloper
	admissions      remediation.Admissions
	admVersion      int
	admWrites       int
	watchers        watchers
}

// Watch implements remediation.MachineWatcher: the channel receives a
// value after every change of the Machine (AddMachine, SetNeedsRemediation,
// SaveState, RemoveNeedsRemediation, Delete) or of its Node (its NodeName's,
// or the backed-up one's), coalesced, until ctx is done; then it is
// closed. The Machine need not exist yet.
func (c *Cluster) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return c.watchers.add(ctx, &c.mu, name), nil
}

// nodeChanged notifies the watchers of the Machines of Node n; the caller
// holds the lock.
func (c *Cluster) nodeChanged(n string) {
	for name, rec := range c.machines {
		if rec.Machine.NodeName == n || rec.State.Backup != nil && rec.State.Backup.Name == n {
			c.watchers.notify(name)
		}
	}
}

// GetAdmissions implements remediation.AdmissionStore.
func (c *Cluster) GetAdmissions(context.Context) (remediation.Admissions, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.admissions
	a.Machines = append([]string(nil), a.Machines...)
	a.Requests = maps.Clone(a.Requests)
	a.Members = maps.Clone(a.Members)
	a.Others = maps.Clone(a.Others)
	a.Version = strconv.Itoa(c.admVersion)
	return a, nil
}

// PutAdmissions implements remediation.AdmissionStore with
// compare-and-swap. The interloper (SetInterloper) is called first with
// the key "admissions"; then, under the lock, nothing is written once ctx
// has ended (its Err, asked just before the write: a reboot.Guard's write
// after its lease ran out is refused).
func (c *Cluster) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	c.between.run("admissions")
	return c.putAdmissions(ctx, a)
}

// putAdmissions applies PutAdmissions' compare-and-swap under the lock,
// nothing written once ctx has ended.
func (c *Cluster) putAdmissions(ctx context.Context, a remediation.Admissions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "admissions"); err != nil {
		return err
	}
	if a.Version != strconv.Itoa(c.admVersion) {
		return fmt.Errorf("fake: admissions version %s, current %d: %w", a.Version, c.admVersion, remediation.ErrConflict)
	}
	c.admVersion++
	c.admWrites++
	c.admissions = remediation.Admissions{Machines: append([]string(nil), a.Machines...), Requests: maps.Clone(a.Requests),
		Members: maps.Clone(a.Members), Others: maps.Clone(a.Others)}
	return nil
}

// SetInterloper installs a second writer: f is called with the Machine's
// name, without the lock, just before every SaveState is applied, and may
// change the Machine (SetNeedsRemediation, AddMachine) as a health checker
// or a second reconciler would between the read and the write; SaveState
// then fails with ErrConflict. nil removes it. Safe while in use.
func (c *Cluster) SetInterloper(f func(machine string)) { c.between.set(f) }

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{machines: map[string]remediation.MachineRecord{}, nodes: map[string]remediation.Node{}}
}

// AddMachine adds or replaces a Machine (its state is kept if it exists).
func (c *Cluster) AddMachine(m remediation.Machine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.machines[m.Name]
	rec.Machine = m
	c.bump(&rec)
	c.machines[m.Name] = rec
}

func (c *Cluster) bump(rec *remediation.MachineRecord) {
	c.version++
	rec.Version = strconv.Itoa(c.version)
	c.watchers.notify(rec.Machine.Name)
}

// SetNeedsRemediation sets or clears NeedsRemediationAnnotation, as the
// health checker does.
func (c *Cluster) SetNeedsRemediation(name string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setNeedsRemediation(name, on)
}

// setNeedsRemediation is SetNeedsRemediation; the caller holds the lock.
func (c *Cluster) setNeedsRemediation(name string, on bool) {
	if rec, ok := c.machines[name]; ok && rec.Machine.NeedsRemediation != on {
		rec.Machine.NeedsRemediation = on
		c.bump(&rec)
		c.machines[name] = rec
	}
}

// PutNode creates or replaces a Node (a kubelet registering).
func (c *Cluster) PutNode(n remediation.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n.Exists = true
	n.Labels, n.Annotations = maps.Clone(n.Labels), maps.Clone(n.Annotations)
	c.nodes[n.Name] = n
	c.nodeChanged(n.Name)
}

// SetNodeReady sets a Node's readiness if it exists.
func (c *Cluster) SetNodeReady(name string, ready bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.nodes[name]; ok {
		n.Ready = ready
		c.nodes[name] = n
		c.nodeChanged(name)
	}
}

// Node returns a copy of a Node (Exists false if absent).
func (c *Cluster) Node(name string) remediation.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	n.Labels, n.Annotations = maps.Clone(n.Labels), maps.Clone(n.Annotations)
	return n
}

// DeletedNodes lists every Node deletion, in order.
func (c *Cluster) DeletedNodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deleted...)
}

// Get implements remediation.MachineStore.
func (c *Cluster) Get(_ context.Context, name string) (remediation.MachineRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.machines[name]
	if !ok {
		return rec, fmt.Errorf("fake: machine %s: %w", name, remediation.ErrNotFound)
	}
	return rec, nil
}

// List implements remediation.MachineStore, sorted by name.
func (c *Cluster) List(context.Context) ([]remediation.MachineRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]remediation.MachineRecord, 0, len(c.machines))
	for _, r := range c.machines {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Machine.Name < out[j].Machine.Name })
	return out, nil
}

// SaveState implements remediation.MachineStore: the interloper
// (SetInterloper) first, then the compare-and-swap under the lock,
// nothing written once ctx has ended.
func (c *Cluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	c.between.run(name)
	return c.saveState(ctx, name, version, s)
}

// saveState is SaveState's compare-and-swap, under the cluster's lock,
// nothing written once ctx has ended.
func (c *Cluster) saveState(ctx context.Context, name, version string, s remediation.State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "machine "+name); err != nil {
		return err
	}
	rec, ok := c.machines[name]
	if !ok {
		return fmt.Errorf("fake: machine %s: %w", name, remediation.ErrNotFound)
	}
	if rec.Version != version {
		return fmt.Errorf("fake: machine %s version %s, current %s: %w", name, version, rec.Version, remediation.ErrConflict)
	}
	rec.State = s
	c.bump(&rec)
	c.machines[name] = rec
	return nil
}

// RemoveNeedsRemediation implements remediation.MachineStore; nothing
// is written once ctx has ended.
func (c *Cluster) RemoveNeedsRemediation(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "machine "+name); err != nil {
		return err
	}
	c.setNeedsRemediation(name, false)
	return nil
}

// Delete implements remediation.MachineStore; nothing is deleted once
// ctx has ended.
func (c *Cluster) Delete(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "machine "+name); err != nil {
		return err
	}
	if _, ok := c.machines[name]; ok {
		delete(c.machines, name)
		c.watchers.notify(name)
	}
	return nil
}

// Nodes returns the cluster's remediation.NodeStore.
func (c *Cluster) Nodes() *ClusterNodes { return (*ClusterNodes)(c) }

// ClusterNodes is the NodeStore view of a Cluster.
type ClusterNodes Cluster

// Get implements remediation.NodeStore.
func (n *ClusterNodes) Get(_ context.Context, name string) (remediation.Node, error) {
	return (*Cluster)(n).Node(name), nil
}

// Delete implements remediation.NodeStore; nothing is deleted once ctx
// has ended (asked under the lock, after BeforeNodeFence).
func (n *ClusterNodes) Delete(ctx context.Context, name, uid string) error {
	c := (*Cluster)(n)
	if c.BeforeNodeFence != nil {
		c.BeforeNodeFence(name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "node "+name); err != nil {
		return err
	}
	if cur, ok := c.nodes[name]; ok {
		if uid != "" && cur.UID != uid {
			return fmt.Errorf("fake: node %s has UID %q, not %q: %w", name, cur.UID, uid, remediation.ErrConflict)
		}
		delete(c.nodes, name)
		c.deleted = append(c.deleted, name)
		c.nodeChanged(name)
	}
	return nil
}

// SetOutOfService implements remediation.NodeStore; nothing is written
// once ctx has ended (asked under the lock, after BeforeNodeFence).
func (n *ClusterNodes) SetOutOfService(ctx context.Context, name string, on bool) error {
	c := (*Cluster)(n)
	if on && c.BeforeNodeFence != nil {
		c.BeforeNodeFence(name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "node "+name); err != nil {
		return err
	}
	if nd, ok := c.nodes[name]; ok {
		nd.OutOfService = on
		c.nodes[name] = nd
		c.nodeChanged(name)
	}
	return nil
}

// AddMetadata implements remediation.NodeStore; nothing is written once
// ctx has ended.
func (n *ClusterNodes) AddMetadata(ctx context.Context, name string, labels, annotations map[string]string) error {
	c := (*Cluster)(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ended(ctx, "node "+name); err != nil {
		return err
	}
	nd, ok := c.nodes[name]
	if !ok {
		return fmt.Errorf("fake: node %s not found", name)
	}
	add := func(dst map[string]string, src map[string]string) map[string]string {
		dst = maps.Clone(dst)
		if dst == nil {
			dst = map[string]string{}
		}
		for k, v := range src {
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
		return dst
	}
	nd.Labels, nd.Annotations = add(nd.Labels, labels), add(nd.Annotations, annotations)
	c.nodes[name] = nd
	c.nodeChanged(name)
	return nil
}

// ended returns an error naming what if ctx has ended (its Err, which a
// reboot.ClockBound context reports past its deadline before its timer
// closes Done), nil otherwise: the cluster's writers ask it under the
// lock, just before they write, as a store that checks its context before
// it sends does, so a reboot.Guard's write after its lease ran out is
// refused and changes nothing.
func ended(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: %s: not written: %w", what, err)
	}
	return nil
}
