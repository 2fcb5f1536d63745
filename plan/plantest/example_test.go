package plantest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// ExampleNewStore shows the constructor a store's test gives to
// StoreContract: a fresh, empty store. In your test:
// plantest.StoreContract(t, newStore).
func ExampleNewStore() {
	var newStore plantest.NewStore = func() (plan.Store, func(), error) { return fake.NewPlanStore(), nil, nil }
	s, _, _ := newStore()
	_, err := s.Get(context.Background(), "none")
	fmt.Println(errors.Is(err, plan.ErrNotFound))
	// Output: true
}

// ExampleStateMachine shows the constructor StateMachine calls once per
// case: each call returns a fresh, empty store (here a bbolt file of its
// own) and the function that closes it. In your test:
// plantest.StateMachine(t, newStore).
func ExampleStateMachine() {
	dir, err := os.MkdirTemp("", "plantest-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	n := 0
	var newStore plantest.NewStore = func() (plan.Store, func(), error) {
		n++
		s, err := plan.OpenBolt(filepath.Join(dir, fmt.Sprintf("plans-%d.db", n)))
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	for i := 0; i < 2; i++ {
		s, closeStore, err := newStore()
		if err != nil {
			fmt.Println(err)
			return
		}
		plans, err := s.List(context.Background())
		fmt.Println(len(plans), err)
		closeStore()
	}
	// Output:
	// 0 <nil>
	// 0 <nil>
}
