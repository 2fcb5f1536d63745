package plantest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// TestStateMachine runs the executor's state machine on the project's own
// plan stores: the fake (in memory), bbolt and the file store (issue 40,
// point 4). The etcd module runs it on etcd.Store.
func TestStateMachine(t *testing.T) {
	t.Run("fake", func(t *testing.T) { plantest.StateMachine(t, newFake) })
	t.Run("bbolt", func(t *testing.T) { plantest.StateMachine(t, newBolt(t)) })
	t.Run("file", func(t *testing.T) { plantest.StateMachine(t, newFile(t)) })
}

// lastWriterWins is a store that ignores versions: the bug the kit exists
// to catch (an operator's stop or cancel written between an executor's
// read and its save is overwritten, and reboots start after it).
type lastWriterWins struct{ *fake.PlanStore }

func (s lastWriterWins) Put(ctx context.Context, p plan.Plan) error {
	cur, err := s.Get(ctx, p.UUID)
	if err != nil {
		return err
	}
	p.Version = cur.Version
	return s.PlanStore.Put(ctx, p)
}

// TestStateMachineCatchesLastWriterWins: StateMachine fails a store that
// ignores versions. Rapid fails the test it runs in, so the kit runs in a
// child process of this test binary, with a fixed seed, and the child
// must fail with rapid's report.
func TestStateMachineCatchesLastWriterWins(t *testing.T) {
	if os.Getenv("PLANTEST_BROKEN_CHILD") != "" {
		plantest.StateMachine(t, func() (plantest.Stores, error) {
			return plantest.Stores{Store: lastWriterWins{fake.NewPlanStore()}}, nil
		})
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateMachineCatchesLastWriterWins$", "-test.timeout=5m",
		"-rapid.seed=1", "-rapid.checks=100", "-rapid.nofailfile", "-rapid.shrinktime=2s")
	cmd.Env = append(os.Environ(), "PLANTEST_BROKEN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("StateMachine passed a store that ignores versions:\n%s", out)
	}
	if !strings.Contains(string(out), "[rapid] failed") {
		t.Fatalf("the child failed without rapid's report (%v):\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "[rapid] failed") || strings.Contains(l, "stale Version") || strings.Contains(l, "landed") {
			t.Logf("caught it: %s", strings.TrimSpace(l))
		}
	}
}
