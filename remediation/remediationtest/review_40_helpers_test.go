package remediationtest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/remediation"
)

// records is a minimal RecordStore. (Review 40's test was written against
// a tree that had it in remediationtest_test.go, since replaced there by
// fake.Records; it is kept here as it was.)
type records struct {
	mu sync.Mutex
	rs map[string]remediation.Record
	n  int
}

func (s *records) Get(_ context.Context, name string) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rs[name]
	if !ok {
		return r, fmt.Errorf("%s: %w", name, remediation.ErrNotFound)
	}
	return r, nil
}

func (s *records) List(context.Context) ([]remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []remediation.Record
	for _, r := range s.rs {
		out = append(out, r)
	}
	return out, nil
}

func (s *records) Update(_ context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rs[r.Name].Version != r.Version {
		return r, fmt.Errorf("%s: %w", r.Name, remediation.ErrConflict)
	}
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[r.Name] = r
	return r, nil
}
