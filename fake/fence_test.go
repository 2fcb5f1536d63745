package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestFleetFencingTokens: once an action with token 5 was seen, one with
// token 3 (a deposed executor) does nothing; 0 (no token) always passes.
func TestFleetFencingTokens(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	f := fake.NewFleet(clk.Now, "", fake.FleetServer{UUID: "a", Hostname: "a", Queue: time.Minute}, fake.FleetServer{UUID: "b", Hostname: "b"})
	ctx := context.Background()
	if err := f.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: "a", JobUUID: "ja", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	err := f.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: "b", JobUUID: "jb", Fence: 3})
	if !errors.Is(err, fake.ErrStaleFence) {
		t.Fatalf("stale token accepted: %v", err)
	}
	if err := f.CancelJob(ctx, plan.Action{Kind: plan.ActionCancelJob, Server: "a", JobUUID: "ja", Fence: 4}); !errors.Is(err, fake.ErrStaleFence) {
		t.Fatalf("stale cancel accepted: %v", err)
	}
	if n := f.JobsCreated()["b"]; n != 0 {
		t.Fatalf("stale action created %d job(s)", n)
	}
	if f.StaleActions() != 2 {
		t.Fatalf("stale actions %d", f.StaleActions())
	}
	if err := f.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: "b", JobUUID: "jb"}); err != nil {
		t.Fatal(err)
	}
}
