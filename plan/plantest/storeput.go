package plantest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// putChecks checks what plan's doc says every store refuses on a write
// (Put): a plan made to hold servers another unfinished plan holds (a dry
// run promoted by clearing DryRun; a plan that ended set unfinished again:
// plan.NewlyHolds, ErrServerInPlan), DryRun set on an unfinished plan that
// is not a dry run (ErrDryRunSet), and a change of a plan's servers; a
// refused write writes nothing. It uses servers u5 to u7, which no other
// check of the kit uses.
func putChecks(ctx context.Context, t testing.TB, s plan.Store, at time.Time) {
	t.Helper()
	// A dry run over u5, then a real plan over u5: a dry run holds no
	// server, so both are created.
	dry, err := runningPlan("plan-dry", at, "u5")
	if err != nil {
		t.Fatal(err)
	}
	dry.DryRun = true
	if err := s.Create(ctx, dry); err != nil {
		t.Errorf("Create of a dry-run plan: %v", err)
		return
	}
	holder, _ := runningPlan("plan-real", at, "u5")
	if err := s.Create(ctx, holder); err != nil {
		t.Errorf("Create of a plan over a server only a dry-run plan has: %v, want success (a dry run holds no server)", err)
		return
	}
	if d, err := s.Get(ctx, "plan-dry"); err != nil {
		t.Errorf("Get: %v", err)
	} else {
		d.DryRun = false
		err := s.Put(ctx, d)
		if !errors.Is(err, plan.ErrServerInPlan) {
			t.Errorf("Put clearing DryRun on a dry-run plan whose server u5 the unfinished plan plan-real holds: %v, want an error wrapping plan.ErrServerInPlan (plan.NewlyHolds: two plans would reboot u5 at once, each counting its own concurrency)", err)
		}
		if cur, _ := s.Get(ctx, "plan-dry"); !cur.DryRun {
			t.Errorf("Put clearing DryRun (%v): the store wrote it, plan-dry is no longer a dry run", err)
		}
	}
	if r, err := s.Get(ctx, "plan-real"); err != nil {
		t.Errorf("Get: %v", err)
	} else {
		r.DryRun = true
		err := s.Put(ctx, r)
		if !errors.Is(err, plan.ErrDryRunSet) {
			t.Errorf("Put setting DryRun on the running plan plan-real (not a dry run): %v, want an error wrapping plan.ErrDryRunSet (its reboots may have started, and a dry run holds no server)", err)
		}
		if cur, _ := s.Get(ctx, "plan-real"); cur.DryRun {
			t.Errorf("Put setting DryRun on a running plan (%v): the store wrote it", err)
		}
	}

	// A plan over u6 that ended (cancelled, nothing in flight), then
	// another over u6; the first set unfinished again must be refused.
	ended, _ := runningPlan("plan-ended", at, "u6")
	if err := s.Create(ctx, ended); err != nil {
		t.Errorf("Create: %v", err)
		return
	}
	e, err := s.Get(ctx, "plan-ended")
	if err != nil {
		t.Errorf("Get: %v", err)
		return
	}
	if e, err = plan.Cancel(e); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, e); err != nil {
		t.Errorf("Put cancelling a plan: %v", err)
		return
	}
	next, _ := runningPlan("plan-next", at, "u6")
	if err := s.Create(ctx, next); err != nil {
		t.Errorf("Create of a plan over a server of a plan that ended: %v, want success", err)
		return
	}
	if e, err = s.Get(ctx, "plan-ended"); err != nil {
		t.Errorf("Get: %v", err)
	} else {
		e.State = plan.StateStopped
		err := s.Put(ctx, e)
		if !errors.Is(err, plan.ErrServerInPlan) {
			t.Errorf("Put setting plan-ended, which ended, unfinished again while the unfinished plan plan-next holds its server u6: %v, want an error wrapping plan.ErrServerInPlan (plan.NewlyHolds, plan.ErrEndedOverlaps)", err)
		}
		if cur, _ := s.Get(ctx, "plan-ended"); cur.Unfinished() {
			t.Errorf("Put setting an ended plan unfinished again (%v): the store wrote it (state %s)", err, cur.State)
		}
	}

	// The servers of a plan do not change.
	if n, err := s.Get(ctx, "plan-next"); err != nil {
		t.Errorf("Get: %v", err)
	} else {
		n.Reboots[0].ServerUUID = "u7"
		err := s.Put(ctx, n)
		if err == nil {
			t.Errorf("Put changing plan-next's server u6 to u7: accepted, want refused (the servers of a plan do not change)")
		}
		if cur, _ := s.Get(ctx, "plan-next"); len(cur.Reboots) != 1 || cur.Reboots[0].ServerUUID != "u6" {
			t.Errorf("Put changing a plan's servers (%v): the store wrote it", err)
		}
	}
}
