package plantest_test

import (
	"context"
	"errors"
	"fmt"

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
