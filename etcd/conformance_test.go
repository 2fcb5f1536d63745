package etcd

import (
	"testing"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// TestStoreConformance runs the plan store conformance kit on etcd.Store
// (issue 40, point 4).
func TestStoreConformance(t *testing.T) {
	plantest.StoreContract(t, func() (plan.Store, func(), error) { return NewStore(newClient(t), prefix(t)), nil, nil })
}

// TestStateMachine runs the kit's executor state machine on etcd.Store
// (issue 40, point 4): each case on a fresh prefix of the shared etcd,
// through one client.
func TestStateMachine(t *testing.T) {
	cli := newClient(t)
	plantest.StateMachine(t, func() (plan.Store, func(), error) { return NewStore(cli, prefix(t)), nil, nil })
}
