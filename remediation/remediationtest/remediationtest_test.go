package remediationtest_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestFakeCluster runs the kit on the fake Cluster (issue 40, point 4).
func TestFakeCluster(t *testing.T) {
	remediationtest.Contract(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := fake.NewCluster()
		for _, m := range ms {
			c.AddMachine(m)
		}
		for _, n := range ns {
			c.PutNode(n)
		}
		return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), Admissions: c}, nil
	})
}

// records is a minimal RecordStore.
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

// TestRecords runs the kit on the single-record adapter.
func TestRecords(t *testing.T) {
	remediationtest.Contract(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		s := &records{rs: map[string]remediation.Record{}}
		for i, m := range ms {
			n := ns[i]
			s.rs[m.Name] = remediation.Record{Name: m.Name, Group: m.Cluster, Unhealthy: m.NeedsRemediation, Ready: n.Ready,
				Labels: n.Labels, Annotations: n.Annotations, Version: "0"}
		}
		machines, nodes := remediation.Records(s)
		return remediationtest.Stores{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), SingleRecord: true}, nil
	})
}

// lastWriterWins saves a State whatever version it was read at.
type lastWriterWins struct{ *fake.Cluster }

func (c lastWriterWins) SaveState(ctx context.Context, name, _ string, s remediation.State) error {
	cur, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	return c.Cluster.SaveState(ctx, name, cur.Version, s)
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recorder) Helper()                   {}

// TestContractCatchesLostState (issue 40, point 4): the kit fails a
// MachineStore whose SaveState does not compare versions.
func TestContractCatchesLostState(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		remediationtest.Contract(r, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
			c := fake.NewCluster()
			for _, m := range ms {
				c.AddMachine(m)
			}
			for _, n := range ns {
				c.PutNode(n)
			}
			return remediationtest.Stores{Machines: lastWriterWins{c}, Nodes: c.Nodes(), Admissions: c}, nil
		})
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatal("a SaveState without compare-and-swap passed the kit")
	}
	t.Logf("caught: %v", r.failed)
}
