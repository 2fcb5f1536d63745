package remediationtest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
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

func (s *records) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil { // Contract's ended-context check (round 40ai)
		return r, fmt.Errorf("%s: not written: %w", r.Name, err)
	}
	if s.rs[r.Name].Version != r.Version {
		return r, fmt.Errorf("%s: %w", r.Name, remediation.ErrConflict)
	}
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[r.Name] = r
	return r, nil
}

// seededRecords is a records store holding one Record per Machine of ms,
// merged with its Node of ns (same index), at Version "0": the world
// Contract asks for, seen through the single-record adapter.
func seededRecords(ms []remediation.Machine, ns []remediation.Node) *records {
	s := &records{rs: map[string]remediation.Record{}}
	for i, m := range ms {
		n := ns[i]
		s.rs[m.Name] = remediation.Record{Name: m.Name, Group: m.Cluster, ControlPlane: m.ControlPlane, Unhealthy: m.NeedsRemediation,
			Ready: n.Ready, Labels: n.Labels, Annotations: n.Annotations, Version: "0"}
	}
	return s
}

// seedCluster adds the Machines ms and the Nodes ns to c and returns c:
// the world Contract asks for, on the fake Cluster.
func seedCluster(c *fake.Cluster, ms []remediation.Machine, ns []remediation.Node) *fake.Cluster {
	for _, m := range ms {
		c.AddMachine(m)
	}
	for _, n := range ns {
		c.PutNode(n)
	}
	return c
}

// markOn is a Stores.Mark hook that plays the health checker on c.
func markOn(c *fake.Cluster) func(context.Context, string, bool) error {
	return func(_ context.Context, m string, on bool) error {
		c.SetNeedsRemediation(m, on)
		return nil
	}
}

// expectContractFails runs remediationtest.Contract over newStores with a
// recorder in place of t (in a goroutine of its own, since the recorder's
// Fatalf ends that goroutine), fails t with why if Contract reported
// nothing, and logs what it caught.
func expectContractFails(t *testing.T, newStores remediationtest.NewStores, why string) {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		remediationtest.Contract(r, newStores)
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatal(why)
	}
	t.Logf("caught: %v", r.failed)
}
