package remediation_test

import (
	"context"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// recordInventory is a user's own inventory of single records with no
// Watch (the store fake.Records is, without its Watch): the review 40
// tests need a store the Loop must poll.
type recordInventory struct{ rs *fake.Records }

func (s *recordInventory) Get(ctx context.Context, name string) (remediation.Record, error) {
	return s.rs.Get(ctx, name)
}

func (s *recordInventory) List(ctx context.Context) ([]remediation.Record, error) {
	return s.rs.List(ctx)
}

func (s *recordInventory) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	return s.rs.Update(ctx, r)
}

func (s *recordInventory) set(name string, f func(r *remediation.Record)) { s.rs.Set(name, f) }
