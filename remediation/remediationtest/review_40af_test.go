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

// review40afMachines is a MachineStore a user might write over a table
// with a version column, read then write: SaveState reads the record,
// compares its version with the one given, and then writes (the write
// itself not conditioned on that version, e.g. an UPDATE without
// "AND version = ?"). Every call made one at a time behaves.
type review40afMachines struct {
	*fake.Cluster
	between func() // between the check and the write (test only)
}

func (m *review40afMachines) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	rec, err := m.Cluster.Get(ctx, name)
	if err != nil {
		return err
	}
	if rec.Version != version {
		return fmt.Errorf("machine %s: %w", name, remediation.ErrConflict)
	}
	if m.between != nil {
		m.between()
	}
	cur, err := m.Cluster.Get(ctx, name)
	if err != nil {
		return err
	}
	return m.Cluster.SaveState(ctx, name, cur.Version, s)
}

// TestReview40af_ContractPassesSaveStateNotAtomic: remediationtest's doc
// says Contract checks "the compare-and-swap of State", and its own
// message names why it matters: a stale SaveState accepted means "two
// reconciles would both start". plantest and reboottest race their
// stores' compare-and-swap because "a store whose check is not atomic
// with its write passes every check made one call at a time"
// (racecheck); remediationtest races the admission record only, and
// checks SaveState one call at a time. A MachineStore whose version check
// is not atomic with its write passes, while (ground truth, read back
// from the cluster) two reconcilers' SaveStates from one read are both
// accepted: one's phase is silently overwritten (a power-off requested by
// one, a retry decided by the other).
func TestReview40af_ContractPassesSaveStateNotAtomic(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "s1", UID: "s1", NodeName: "s1", Cluster: "c", NeedsRemediation: true})
	c.PutNode(remediation.Node{Exists: true, Name: "s1", UID: "s1", Ready: false})
	var both sync.WaitGroup
	both.Add(2)
	m := &review40afMachines{Cluster: c, between: func() { both.Done(); both.Wait() }}
	rec, err := m.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, st := range []remediation.State{{Phase: remediation.PhasePowerOffRequested, Attempt: 1}, {Phase: remediation.PhasePowerOffRequested, Attempt: 2}} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.SaveState(ctx, "s1", rec.Version, st) }()
	}
	wg.Wait()
	got, _ := c.Get(ctx, "s1")
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("setup: want both SaveStates from version %s accepted: %v", rec.Version, errs)
	}
	t.Logf("ground truth: two SaveStates from version %s both accepted; the record holds attempt %d only", rec.Version, got.State.Attempt)

	r := &review40afRecorder{TB: t}
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
			mark := func(_ context.Context, m string, on bool) error { c.SetNeedsRemediation(m, on); return nil }
			return remediationtest.Stores{Machines: &review40afMachines{Cluster: c}, Nodes: c.Nodes(), Admissions: c, OtherAdmissions: c.OtherAdmissions(), Mark: mark}, nil
		})
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatalf("remediationtest.Contract passed a MachineStore whose SaveState version check is not atomic with its write (ground truth: two SaveStates from one read both accepted): it never races SaveState")
	}
	t.Logf("caught: %v", r.failed)
}

// review40afRecorder records failures instead of failing.
type review40afRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *review40afRecorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}
func (r *review40afRecorder) Error(a ...any)            { r.Errorf("%s", fmt.Sprint(a...)) }
func (r *review40afRecorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *review40afRecorder) Fatal(a ...any)            { r.Errorf("%s", fmt.Sprint(a...)); runtime.Goexit() }
func (r *review40afRecorder) Helper()                   {}
