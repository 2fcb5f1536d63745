package etcd

import (
	"testing"

	"github.com/rebootkit/rebootkit/plan/plantest"
)

// TestStoreConformance runs the plan store conformance kit on etcd.Store
// (issue 40, point 4), with Other a store on a second client (its own
// connection to etcd) under the same prefix, as another process has it.
func TestStoreConformance(t *testing.T) {
	plantest.StoreContract(t, func() (plantest.Stores, error) {
		pre := prefix(t)
		return plantest.Stores{Store: NewStore(newClient(t), pre), Other: NewStore(newClient(t), pre)}, nil
	})
}

// TestStateMachine runs the kit's executor state machine on etcd.Store
// (issue 40, point 4): each case on a fresh prefix of the shared etcd,
// through one client (Other, on a second client, is StoreContract's).
func TestStateMachine(t *testing.T) {
	cli, cli2 := newClient(t), newClient(t)
	plantest.StateMachine(t, func() (plantest.Stores, error) {
		pre := prefix(t)
		return plantest.Stores{Store: NewStore(cli, pre), Other: NewStore(cli2, pre)}, nil
	})
}
