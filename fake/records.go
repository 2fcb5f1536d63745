package fake

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/remediation"
)

// Records is an in-memory remediation.RecordStore and RecordWatcher: an
// inventory where the machine and the node are one record
// (remediation.Records adapts it).
// Update is a compare-and-swap on Version; every write, Set included,
// gives the record a new Version. Safe for concurrent use.
type Records struct {
	mu       sync.Mutex
	rs       map[string]remediation.Record
	n        int
	watchers watchers
}

// Compile-time check: Records can watch (remediation.Records' MachineStore
// is then a remediation.MachineWatcher).
var _ remediation.RecordWatcher = (*Records)(nil)

// Watch implements remediation.RecordWatcher: the channel receives a value
// after every write of the record (Update or Set), coalesced, until ctx is
// done; then it is closed. The record need not exist yet.
func (s *Records) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return s.watchers.add(ctx, &s.mu, name), nil
}

// NewRecords returns a store holding rs (their Versions are replaced).
func NewRecords(rs ...remediation.Record) *Records {
	s := &Records{rs: map[string]remediation.Record{}}
	for _, r := range rs {
		s.Set(r.Name, func(x *remediation.Record) { *x = r })
	}
	return s
}

// Get implements remediation.RecordStore.
func (s *Records) Get(_ context.Context, name string) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rs[name]
	if !ok {
		return r, fmt.Errorf("fake: record %s: %w", name, remediation.ErrNotFound)
	}
	return copyRecord(r), nil
}

// List implements remediation.RecordStore.
func (s *Records) List(context.Context) ([]remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]remediation.Record, 0, len(s.rs))
	for _, r := range s.rs {
		out = append(out, copyRecord(r))
	}
	return out, nil
}

// Update implements remediation.RecordStore: it fails with
// remediation.ErrConflict unless r.Version is the stored one, and writes
// nothing once ctx has ended (asked under the lock, just before the
// write: a reboot.Guard's write after its lease ran out is refused).
func (s *Records) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ended(ctx, "record "+r.Name); err != nil {
		return r, err
	}
	if s.rs[r.Name].Version != r.Version {
		return r, fmt.Errorf("fake: record %s: %w", r.Name, remediation.ErrConflict)
	}
	return s.putLocked(r), nil
}

// Set changes (or creates) the named record as another writer would
// (a health checker, a node agent): f edits it, and it gets a new
// Version.
func (s *Records) Set(name string, f func(r *remediation.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := copyRecord(s.rs[name])
	f(&r)
	r.Name = name
	s.putLocked(r)
}

func (s *Records) putLocked(r remediation.Record) remediation.Record {
	s.n++
	r.Version = strconv.Itoa(s.n)
	r = copyRecord(r)
	s.rs[r.Name] = r
	s.watchers.notify(r.Name)
	return copyRecord(r)
}

func copyRecord(r remediation.Record) remediation.Record {
	r.Labels = maps.Clone(r.Labels)
	r.Annotations = maps.Clone(r.Annotations)
	return r
}
