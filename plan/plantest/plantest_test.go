package plantest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// TestProjectStores runs the kit on the project's own plan stores: the
// fake, bbolt and the file store (issue 40, point 4). The etcd module runs
// it on etcd.Store.
func TestProjectStores(t *testing.T) {
	t.Run("fake", func(t *testing.T) { plantest.StoreContract(t, newFake) })
	t.Run("bbolt", func(t *testing.T) { plantest.StoreContract(t, newBolt(t)) })
	t.Run("file", func(t *testing.T) { plantest.StoreContract(t, newFile(t)) })
}

// newFake is a fake.PlanStore and a second handle on its plans.
func newFake() (plantest.Stores, error) {
	s := fake.NewPlanStore()
	return plantest.Stores{Store: s, Other: s.Other()}, nil
}

// newBolt opens a bbolt file of its own per call. Other is nil: bbolt
// holds an exclusive lock on its file for as long as it is open (a second
// OpenBolt of the file, in this process or another, waits a second and
// fails with plan.ErrLocked), so no second handle can share the file:
// one process at a time writes it.
func newBolt(t testing.TB) plantest.NewStore {
	return func() (plantest.Stores, error) {
		s, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
		if err != nil {
			return plantest.Stores{}, err
		}
		return plantest.Stores{Store: s, Close: func() { s.Close() }}, nil
	}
}

// newFile is a FileStore on a directory of its own per call, and a second
// FileStore on the same directory: each call of either takes the
// directory's lock through its own open of <Dir>/.lock, as another
// process's FileStore does.
func newFile(t testing.TB) plantest.NewStore {
	return func() (plantest.Stores, error) {
		dir := t.TempDir()
		return plantest.Stores{Store: plan.FileStore{Dir: dir}, Other: plan.FileStore{Dir: dir}}, nil
	}
}

// TestFakeFleet runs the Fleet's job contract on fake.Fleet (issue 40,
// point 4).
func TestFakeFleet(t *testing.T) {
	plantest.FleetContract(t, func() (plantest.Fleet, error) {
		clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var servers []fake.FleetServer
		for _, id := range []string{"s1", "s2", "s3"} {
			servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
				Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
		}
		f := fake.NewFleet(clk.Now, "", servers...)
		return plantest.Fleet{Fleet: f, Servers: f.Servers(), Advance: func(d time.Duration) { clk.Advance(d) }}, nil
	})
}

// TestFakeFleetShard runs the Fleet's job contract on fake.Fleet with a
// database shard whose primary is s1, named in Fleet.ShardPrimary: the
// fake reports it and the Executor freezes the shard before s1's job.
func TestFakeFleetShard(t *testing.T) {
	plantest.FleetContract(t, func() (plantest.Fleet, error) {
		clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var servers []fake.FleetServer
		for _, id := range []string{"s1", "s2", "s3"} {
			servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
				Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
		}
		f := fake.NewFleet(clk.Now, "s1", servers...)
		frozen := func() bool { fr, _ := f.Frozen(); return fr }
		return plantest.Fleet{Fleet: f, Servers: f.Servers(), ShardPrimary: "s1", Advance: func(d time.Duration) { clk.Advance(d) },
			Close: func() {
				if frozen() {
					t.Errorf("the shard is left frozen after the contract")
				}
			}}, nil
	})
}
