package remediationtest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestFakeCluster runs the kit on the fake Cluster (issue 40, point 4).
func TestFakeCluster(t *testing.T) {
	t.Parallel()
	remediationtest.Contract(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := fake.NewCluster()
		for _, m := range ms {
			c.AddMachine(m)
		}
		for _, n := range ns {
			c.PutNode(n)
		}
		mark := func(_ context.Context, m string, on bool) error { c.SetNeedsRemediation(m, on); return nil }
		return remediationtest.Stores{Machines: c, OtherMachines: c.OtherMachines(), Nodes: c.Nodes(), Admissions: c, OtherAdmissions: c.OtherAdmissions(), Mark: mark}, nil
	})
}

// newRecords is the kit's NewStores over the single-record adapter.
func newRecords(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
	s := fake.NewRecords()
	for i, m := range ms {
		n := ns[i]
		s.Set(m.Name, func(r *remediation.Record) {
			*r = remediation.Record{Group: m.Cluster, ControlPlane: m.ControlPlane, Unhealthy: m.NeedsRemediation,
				Ready: n.Ready, Labels: n.Labels, Annotations: n.Annotations}
		})
	}
	machines, nodes := remediation.Records(s)
	adm := fake.NewCluster()
	return remediationtest.Stores{Machines: machines, Nodes: nodes, Admissions: adm, OtherAdmissions: adm.OtherAdmissions(), SingleRecord: true,
		World: recordsWorld{s}}, nil
}

// TestRecords runs the kit, the contract and the state machine, on the
// single-record adapter (issue 40, point 4).
func TestRecords(t *testing.T) {
	t.Parallel()
	t.Run("Contract", func(t *testing.T) { remediationtest.Contract(t, newRecords) })
	t.Run("StateMachine", func(t *testing.T) { remediationtest.StateMachine(t, newRecords) })
}

// recordsWorld plays the cluster on records: the node is the record.
type recordsWorld struct{ s *fake.Records }

func (w recordsWorld) change(name string, f func(r *remediation.Record)) error {
	r, err := w.s.Get(context.Background(), name)
	if err != nil {
		return err
	}
	f(&r)
	_, err = w.s.Update(context.Background(), r)
	return err
}

func (w recordsWorld) SetNeedsRemediation(_ context.Context, m string, on bool) error {
	return w.change(m, func(r *remediation.Record) { r.Unhealthy = on })
}

func (w recordsWorld) PutNode(_ context.Context, n remediation.Node) error {
	return w.change(n.Name, func(r *remediation.Record) { r.Ready, r.Labels = n.Ready, n.Labels })
}

func (w recordsWorld) SetNodeReady(_ context.Context, n string, ready bool) error {
	return w.change(n, func(r *remediation.Record) { r.Ready = ready })
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
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: lastWriterWins{c}, Nodes: c.Nodes(), Admissions: c}, nil
	}, "a SaveState without compare-and-swap passed the kit")
}
