package plantest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// ExampleNewStore shows the constructor a store's test gives to
// StoreContract: a fresh, empty store and a second handle on the same
// plans, as another process has it (for your store: a second client or
// Open of the same database). In your test:
// plantest.StoreContract(t, newStore).
func ExampleNewStore() {
	var newStore plantest.NewStore = func() (plantest.Stores, error) {
		s := fake.NewPlanStore()
		return plantest.Stores{Store: s, Other: s.Other()}, nil
	}
	stores, _ := newStore()
	p, _, err := plan.Create([]plan.Server{{UUID: "u1", Hostname: "host-u1", Platform: "1"}},
		plan.CreateOptions{UUID: "p1", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1), FailureBudget: plan.Count(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(stores.Store.Create(context.Background(), p))
	got, err := stores.Other.Get(context.Background(), "p1")
	fmt.Println(got.UUID, err)
	// Output:
	// <nil>
	// p1 <nil>
}

// ExampleStateMachine shows the constructor StateMachine calls once per
// case: each call returns a fresh, empty store (here a bbolt file of its
// own, which one process at a time may open: no Other) and the function
// that closes it. In your test: plantest.StateMachine(t, newStore).
func ExampleStateMachine() {
	dir, err := os.MkdirTemp("", "plantest-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	n := 0
	var newStore plantest.NewStore = func() (plantest.Stores, error) {
		n++
		s, err := plan.OpenBolt(filepath.Join(dir, fmt.Sprintf("plans-%d.db", n)))
		if err != nil {
			return plantest.Stores{}, err
		}
		return plantest.Stores{Store: s, Close: func() { s.Close() }}, nil
	}
	for i := 0; i < 2; i++ {
		stores, err := newStore()
		if err != nil {
			fmt.Println(err)
			return
		}
		plans, err := stores.Store.List(context.Background())
		fmt.Println(len(plans), err)
		stores.Close()
	}
	// Output:
	// 0 <nil>
	// 0 <nil>
}
