package plantest_test

import (
	"path/filepath"
	"testing"

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
