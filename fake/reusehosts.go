package fake

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/nodereuse"
)

// Compile-time check: *ReuseHosts is a nodereuse.HostStore.
var _ nodereuse.HostStore = (*ReuseHosts)(nil)

// ReuseHosts is an in-memory nodereuse.HostStore with versions. Not for
// production.
type ReuseHosts struct {
	mu      sync.Mutex
	hosts   map[string]nodereuse.Host
	version int
	claims  map[string][]string // host -> consumers that claimed it, in order
	between interloper
}

// SetInterloper installs a second writer: f is called with the host's name,
// without the lock, just before every Claim or SetLabel is applied, and may
// change the host (Update) as another controller would; the write then
// fails with ErrConflict. nil removes it. Safe while in use.
func (s *ReuseHosts) SetInterloper(f func(name string)) { s.between.set(f) }

// NewReuseHosts returns a store holding copies of hosts.
func NewReuseHosts(hosts ...nodereuse.Host) *ReuseHosts {
	s := &ReuseHosts{hosts: map[string]nodereuse.Host{}, claims: map[string][]string{}}
	for _, h := range hosts {
		s.put(h)
	}
	return s
}

func (s *ReuseHosts) put(h nodereuse.Host) {
	s.version++
	h.Version = strconv.Itoa(s.version)
	h.Labels = maps.Clone(h.Labels)
	s.hosts[h.Name] = h
}

// List returns copies of all hosts, sorted by name.
func (s *ReuseHosts) List(context.Context) ([]nodereuse.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]nodereuse.Host, 0, len(s.hosts))
	for _, h := range s.hosts {
		h.Labels = maps.Clone(h.Labels)
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Claim implements nodereuse.HostStore.
func (s *ReuseHosts) Claim(_ context.Context, name, version, consumer string, removeLabel bool) error {
	s.between.run(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok || h.Version != version || h.ConsumerRef != "" {
		return fmt.Errorf("fake: claim %s at version %s: %w", name, version, nodereuse.ErrConflict)
	}
	h.ConsumerRef = consumer
	if removeLabel {
		h.Labels = maps.Clone(h.Labels)
		delete(h.Labels, nodereuse.Label)
	}
	s.claims[name] = append(s.claims[name], consumer)
	s.put(h)
	return nil
}

// SetLabel implements nodereuse.HostStore.
func (s *ReuseHosts) SetLabel(_ context.Context, name, version, value string) error {
	s.between.run(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok || h.Version != version {
		return fmt.Errorf("fake: label %s at version %s: %w", name, version, nodereuse.ErrConflict)
	}
	h.Labels = maps.Clone(h.Labels)
	if h.Labels == nil {
		h.Labels = map[string]string{}
	}
	h.Labels[nodereuse.Label] = value
	s.put(h)
	return nil
}

// Update changes a host as the operator would (state, consumer, flags)
// and bumps its version.
func (s *ReuseHosts) Update(name string, f func(h *nodereuse.Host)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok {
		return fmt.Errorf("fake: host %s not found", name)
	}
	h.Labels = maps.Clone(h.Labels)
	f(&h)
	s.put(h)
	return nil
}

// Claims returns, per host, every consumer that successfully claimed it,
// in order (a host released and claimed again lists several).
func (s *ReuseHosts) Claims() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.claims))
	for k, v := range s.claims {
		out[k] = append([]string(nil), v...)
	}
	return out
}
