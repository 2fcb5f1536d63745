package remediation_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/remediation"
)

// recordInventory is a user's own inventory of single records, with no
// Watch: all the store code the single-record adapter needs. (Review 40's
// tests were written against a tree that had it in records_test.go, since
// replaced there by fake.Records; it is kept here as they wrote it.)
type recordInventory struct {
	mu sync.Mutex
	rs map[string]remediation.Record
	n  int
}

func (s *recordInventory) Get(_ context.Context, name string) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rs[name]
	if !ok {
		return r, fmt.Errorf("inventory %s: %w", name, remediation.ErrNotFound)
	}
	return r, nil
}

func (s *recordInventory) List(context.Context) ([]remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []remediation.Record
	for _, r := range s.rs {
		out = append(out, r)
	}
	return out, nil
}

func (s *recordInventory) Update(_ context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rs[r.Name].Version != r.Version {
		return r, fmt.Errorf("inventory %s: %w", r.Name, remediation.ErrConflict)
	}
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[r.Name] = r
	return r, nil
}

func (s *recordInventory) set(name string, f func(r *remediation.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rs[name]
	f(&r)
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[name] = r
}
