package main

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/reboot"
)

// inventory is the company's own host inventory: the records a fencer
// reads and writes. Here it lives in memory; yours is a database table
// with a version column (UPDATE ... WHERE version = ?).
type inventory struct {
	*table
}

// table is the storage every handle (every process) shares: here its
// lock makes the compare-and-swap atomic across handles, as the
// database's conditional UPDATE does, not a lock of one handle's own.
type table struct {
	mu       sync.Mutex
	hosts    map[string]reboot.Host
	version  int
	watchers map[string][]chan struct{}
}

func newInventory(hosts ...reboot.Host) *inventory {
	inv := &inventory{&table{hosts: map[string]reboot.Host{}, watchers: map[string][]chan struct{}{}}}
	for _, h := range hosts {
		inv.put(h)
	}
	return inv
}

// reopen returns a second handle on the same storage, as another process
// (a fencing client, a second controller) opens it: the conformance kit
// races writers across both.
func (inv *inventory) reopen() *inventory { return &inventory{inv.table} }

// put stores h under a new version and wakes the watchers; inv.mu held
// (or not yet shared).
func (inv *inventory) put(h reboot.Host) reboot.Host {
	inv.version++
	h.Version = strconv.Itoa(inv.version)
	h.Annotations = maps.Clone(h.Annotations)
	inv.hosts[h.Name] = h
	for _, ch := range inv.watchers[h.Name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return h
}

// Get implements reboot.HostStore.
func (inv *inventory) Get(_ context.Context, name string) (reboot.Host, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	h, ok := inv.hosts[name]
	if !ok {
		return reboot.Host{}, fmt.Errorf("inventory: %s: %w", name, reboot.ErrNotFound)
	}
	h.Annotations = maps.Clone(h.Annotations)
	return h, nil
}

// Update implements reboot.HostStore: compare-and-swap on the version,
// and nothing written once ctx has ended. The Guard fences a write only
// through the context it hands out: a leader paused past its lease
// resumes with that context ended, and the store must refuse. Ask
// ctx.Err() here, under the lock, just before the write: a database
// driver that only selects on ctx.Done() does not see a Guard's context
// (reboot.ClockBound) ended by the clock before its timer fires, after a
// pause (reboottest.Contract gives Update such a context).
func (inv *inventory) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return reboot.Host{}, fmt.Errorf("inventory: %s: not written: %w", h.Name, err)
	}
	cur, ok := inv.hosts[h.Name]
	if !ok {
		return reboot.Host{}, fmt.Errorf("inventory: %s: %w", h.Name, reboot.ErrNotFound)
	}
	if cur.Version != h.Version {
		return reboot.Host{}, fmt.Errorf("inventory: %s: %w", h.Name, reboot.ErrConflict)
	}
	cur.Annotations, cur.Status = h.Annotations, h.Status
	return inv.put(cur), nil
}

// Watch implements reboot.HostWatcher.
func (inv *inventory) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	inv.mu.Lock()
	inv.watchers[name] = append(inv.watchers[name], ch)
	inv.mu.Unlock()
	go func() {
		<-ctx.Done()
		inv.mu.Lock()
		defer inv.mu.Unlock()
		ws := inv.watchers[name]
		for i, c := range ws {
			if c == ch {
				inv.watchers[name] = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		close(ch)
	}()
	return ch, nil
}

// names lists the hosts (the runner's keys).
func (inv *inventory) names(context.Context) ([]string, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var ns []string
	for n := range inv.hosts {
		ns = append(ns, n)
	}
	return ns, nil
}

// List implements reboot.HostLister (SELECT * FROM hosts): the reboot
// Loop adds to its listing the hosts whose record shows a reboot of its
// own under way, whatever names lists (here names lists them all; an
// inventory that lists only the hosts in service needs it).
func (inv *inventory) List(context.Context) ([]reboot.Host, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]reboot.Host, 0, len(inv.hosts))
	for _, h := range inv.hosts {
		h.Annotations = maps.Clone(h.Annotations)
		out = append(out, h)
	}
	return out, nil
}
