package fake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rebootkit/rebootkit/reboot"
)

// Compile-time checks: *RebootHosts is a reboot.HostStore, a
// reboot.HostWatcher and a reboot.HostLister.
var (
	_ reboot.HostStore   = (*RebootHosts)(nil)
	_ reboot.HostWatcher = (*RebootHosts)(nil)
	_ reboot.HostLister  = (*RebootHosts)(nil)
)

// RebootHosts is an in-memory reboot.HostStore (the reboot controller's
// records, as kube.RebootHosts is over BareMetalHosts; not to be confused
// with remediation.RebootAPIHosts, the remediation's adapter that requests
// reboots through such a store) with versions, so that
// optimistic concurrency behaves as in Kubernetes, and with injectable
// conflicts. Clients (tests) change hosts with Mutate, which bumps the
// version as a real API write would. Not for production.
type RebootHosts struct {
	mu        sync.Mutex
	hosts     map[string]reboot.Host
	version   int
	conflicts int
	updates   int
	between   interloper
	watchers  watchers
}

// SetInterloper installs a second writer: f is called with the host's name,
// without the store's lock, just before every Update is applied, and may
// change the host (with Mutate) as an operator or a second reconciler would
// between the component's read and its write. The Update then fails with
// ErrConflict if f changed the host. nil removes it. Safe while in use.
func (s *RebootHosts) SetInterloper(f func(name string)) { s.between.set(f) }

// NewRebootHosts returns a store holding copies of hosts (versions are
// assigned).
func NewRebootHosts(hosts ...reboot.Host) *RebootHosts {
	s := &RebootHosts{hosts: map[string]reboot.Host{}}
	for _, h := range hosts {
		s.put(h)
	}
	return s
}

func (s *RebootHosts) put(h reboot.Host) reboot.Host {
	s.version++
	h.Version = strconv.Itoa(s.version)
	h.Annotations = maps.Clone(h.Annotations)
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	s.hosts[h.Name] = h
	s.watchers.notify(h.Name)
	return copyHost(h)
}

// Watch implements reboot.HostWatcher: the channel receives a value after
// every write of the host (Update or Mutate), coalesced, until ctx is
// done.
func (s *RebootHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	s.mu.Lock()
	_, ok := s.hosts[name]
	s.mu.Unlock()
	if !ok { // hosts are never deleted
		return nil, fmt.Errorf("fake: host %s: %w", name, reboot.ErrNotFound)
	}
	return s.watchers.add(ctx, &s.mu, name), nil
}

func copyHost(h reboot.Host) reboot.Host {
	h.Annotations = maps.Clone(h.Annotations)
	return h
}

// Get returns a copy of the host.
func (s *RebootHosts) Get(_ context.Context, name string) (reboot.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok {
		return reboot.Host{}, fmt.Errorf("fake: host %s: %w", name, reboot.ErrNotFound)
	}
	return copyHost(h), nil
}

// Update writes annotations and status if h.Version is current and ctx
// has not ended (checked after the hook set by SetInterloper, just before the
// write, as a store that checks its context before it sends does: a
// reboot.Guard's write after its lease ran out is refused).
func (s *RebootHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	s.between.run(h.Name)
	return s.update(ctx, h, true)
}

// update is the compare-and-swap of both handles (Update, Other's):
// under the lock, nothing written once ctx has ended, ErrNotFound,
// ErrConflict unless h.Version is current; this handle's (own) also
// spends the conflicts FailUpdates injected and counts the write.
func (s *RebootHosts) update(ctx context.Context, h reboot.Host, own bool) (reboot.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return reboot.Host{}, fmt.Errorf("fake: host %s: not written: %w", h.Name, err)
	}
	cur, ok := s.hosts[h.Name]
	if !ok {
		return reboot.Host{}, fmt.Errorf("fake: host %s: %w", h.Name, reboot.ErrNotFound)
	}
	if own && s.conflicts > 0 {
		s.conflicts--
		return reboot.Host{}, fmt.Errorf("fake: host %s (injected): %w", h.Name, reboot.ErrConflict)
	}
	if cur.Version != h.Version {
		return reboot.Host{}, fmt.Errorf("fake: host %s version %s, current %s: %w", h.Name, h.Version, cur.Version, reboot.ErrConflict)
	}
	cur.Annotations = h.Annotations
	cur.Status = h.Status
	if own {
		s.updates++
	}
	return s.put(cur), nil
}

// Mutate changes a host as a client would (annotations, Online,
// Deprovisioned) and bumps its version.
func (s *RebootHosts) Mutate(name string, f func(h *reboot.Host)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok {
		return fmt.Errorf("fake: host %s: %w", name, reboot.ErrNotFound)
	}
	h = copyHost(h)
	f(&h)
	s.put(h)
	return nil
}

// FailUpdates makes the next n Updates fail with ErrConflict.
func (s *RebootHosts) FailUpdates(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts += n
}

// Updates counts successful Updates.
func (s *RebootHosts) Updates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// List implements reboot.HostLister: copies of every host, sorted by name.
func (s *RebootHosts) List(context.Context) ([]reboot.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]reboot.Host, 0, len(s.hosts))
	for _, h := range s.hosts {
		out = append(out, copyHost(h))
	}
	slices.SortFunc(out, func(a, b reboot.Host) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
