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
	t.Run("fake", func(t *testing.T) {
		plantest.StoreContract(t, func() (plan.Store, func(), error) { return fake.NewPlanStore(), nil, nil })
	})
	t.Run("bbolt", func(t *testing.T) {
		plantest.StoreContract(t, func() (plan.Store, func(), error) {
			s, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		})
	})
	t.Run("file", func(t *testing.T) {
		plantest.StoreContract(t, func() (plan.Store, func(), error) { return plan.FileStore{Dir: t.TempDir()}, nil, nil })
	})
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
