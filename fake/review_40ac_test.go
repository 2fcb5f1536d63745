package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview40ac_PlanStorePutSkipsStoreChecks: plan's doc: a write that
// sets DryRun on an unfinished plan that is not a dry run is refused
// (ErrDryRunSet), "and so is one that changes a plan's servers, in every
// store"; a write that makes a plan hold servers (NewlyHolds: a dry run's
// DryRun cleared) is checked against the other plans (ErrServerInPlan).
// fake.PlanStore, the store users' tests (and plantest's own checks) run
// on, checks none of them in Put: ground truth, its own List shows two
// unfinished real plans holding u1.
func TestReview40ac_PlanStorePutSkipsStoreChecks(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(uuid string, dry bool) plan.Plan {
		p, _, err := plan.Create([]plan.Server{{UUID: "u1", Hostname: "h1", Platform: "1"}}, plan.CreateOptions{UUID: uuid, Target: "2",
			Select: plan.SelectAll, Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: at, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		p, _ = plan.Run(p)
		return p
	}
	s := fake.NewPlanStore()
	if err := s.Create(ctx, mk("dry", true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, mk("real", false)); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Get(ctx, "dry")
	d.DryRun = false
	err := s.Put(ctx, d)
	all, _ := s.List(ctx)
	holders := 0
	for _, p := range all {
		if p.Unfinished() && !p.DryRun {
			holders++
		}
	}
	if !errors.Is(err, plan.ErrServerInPlan) || holders > 1 {
		t.Errorf("Put clearing DryRun on a plan whose server u1 another running plan holds: %v, %d unfinished real plans hold u1; want ErrServerInPlan and one", err, holders)
	}
	r, _ := s.Get(ctx, "real")
	r.DryRun = true
	if err := s.Put(ctx, r); !errors.Is(err, plan.ErrDryRunSet) {
		t.Errorf("Put setting DryRun on the unfinished real plan: %v, want ErrDryRunSet", err)
	}
}
