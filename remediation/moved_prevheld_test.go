package remediation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestGoneMovedMachineKeepsAdmissionWhilePrevHostOff: a Machine deleted
// after it moved (its admission records its request on h2 and h1 as the
// host it moved from, Member.PrevHost) keeps its admission while h1 has
// been off since the move (a request of its that a pass found on h1
// after the move, Member.PrevHostSeen, since removed, powered it off)
// and is not known on since. Before, the release judged only the
// recorded request's host (h2, free): the admission went while h1 was
// off, and the storm guard counted one host fewer than were off.
// (Review 40q: the Member records that the request was found there; a
// power-off of h1 no request of m1's was found for is another's:
// TestGoneMovedMachinePrevHostOffForAnother.)
func TestGoneMovedMachineKeepsAdmissionWhilePrevHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster() // m1 is gone: never added
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), PendingRebootSince: t0.Add(30 * time.Second)}},
		reboot.Host{Name: "h2", Online: true})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("uid-m1", t0), At: t0, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t0, PrevHostSeen: t0.Add(40 * time.Second)}}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostsMayVanish: true,
			HostOf: func(context.Context, string) (string, error) { return "", remediation.ErrNotFound }}}
	for i := 0; i < 2; i++ {
		_, err := r.Reconcile(ctx, "m1")
		if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
			t.Fatalf("pass %d: gone m1's admission released (err %v) while h1, the host it moved from, has been off since after its request and not on since", i, err)
		}
		if !errors.Is(err, remediation.ErrHostHeld) {
			t.Fatalf("pass %d: want ErrHostHeld naming h1, got %v", i, err)
		}
	}
	// The reboot controller powers h1 on: released.
	h, _ := hosts.Get(ctx, "h1")
	h.Status = reboot.Status{LastPoweredOff: t0.Add(time.Minute), LastPoweredOn: t0.Add(2 * time.Minute), OnConfirmed: t0.Add(2 * time.Minute)}
	if _, err := hosts.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	_, err := r.Reconcile(ctx, "m1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") {
		t.Fatalf("h1 powered on: want m1's admission released, got kept (err %v)", err)
	}
}

// TestMovedWaitsForOldHostOn: a Machine that moved mid-attempt, its
// request removed from the old host, asks the new host only once the old
// one is known on since its request: not while it is off after it with
// no power reading of On (the reboot controller's record alone is written
// before a power-on its BMC may refuse), and on the attempt's timeout it
// fails rather than retrying on the new host.
func TestMovedWaitsForOldHostOn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	cfg := remediation.Config{Timeout: 10 * time.Minute}
	for _, ph := range []remediation.Phase{remediation.PhasePowerOffRequested, remediation.PhaseNodeDeleted} {
		st := remediation.State{Phase: ph, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1"}
		for _, tc := range []struct {
			h    remediation.Host
			held bool // the admission is kept on failure (remediation.Held)
		}{
			{remediation.Host{Name: "bmh-2", OffAfterRequest: true}, true},                      // off, no power-on
			{remediation.Host{Name: "bmh-2", OffAfterRequest: true, RebootPending: true}, true}, // off, reboot pending
			{remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: true}, false},    // power-on decided, unread
			{remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: true, Power: power.StateOff}, false},
		} {
			h := tc.h
			d := cfg.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true}, t0.Add(time.Minute))
			if d.AddRebootAnnotation || d.State.Host != "bmh-1" || d.DeleteNode {
				t.Fatalf("%s, moved, old host %+v: want a wait, got %+v", ph, h, d)
			}
			d = cfg.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true}, t0.Add(time.Hour))
			if d.AddRebootAnnotation || d.State.Phase != remediation.PhaseFailed || d.Release == tc.held {
				t.Fatalf("%s, moved, old host %+v, timed out: want failed, new host not asked, admission kept while held (%v); got %+v", ph, h, tc.held, d)
			}
		}
		on := remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: true, Power: power.StateOn}
		d := cfg.Decide(remediation.Observed{Machine: m, State: st, Host: on, Admitted: true}, t0.Add(time.Minute))
		if !d.AddRebootAnnotation || d.State.Host != "bmh-2" {
			t.Fatalf("%s, moved, old host read on after its power-on: want bmh-2 asked; got %+v", ph, d)
		}
	}
}

// TestMovedAfterCancelWaitsForOldHostOn: a remediation done after a
// cancellation whose host (State.Host) is still off for its request, its
// Machine now mapping to another host and unhealthy again, starts no
// attempt on the new host while the old one is held.
func TestMovedAfterCancelWaitsForOldHostOn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1",
		Canceled: true, CanceledAt: t0, Finished: t0.Add(time.Minute)}
	h := remediation.Host{Name: "bmh-2", OffAfterRequest: true}
	d := remediation.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true, MayStart: true}, t0.Add(2*time.Hour))
	if d.AddRebootAnnotation || d.State.Phase != remediation.PhaseDone || d.Release {
		t.Fatalf("bmh-1 still off for the last request: want no attempt on bmh-2, admission kept; got %+v", d)
	}
	// The reboot controller's record of a power-on alone (no reading:
	// RebootAPIHosts without Power) is not enough to power a second host
	// off for the same Machine (moveBlocked's rule).
	h = remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: true}
	d = remediation.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true, MayStart: true}, t0.Add(2*time.Hour))
	if d.AddRebootAnnotation || d.Release {
		t.Fatalf("bmh-1's power-on recorded, not read: want no attempt on bmh-2, admission kept; got %+v", d)
	}
	h = remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: true, Power: power.StateOn}
	d = remediation.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true, MayStart: true}, t0.Add(2*time.Hour))
	if !d.AddRebootAnnotation || d.State.Host != "bmh-2" {
		t.Fatalf("bmh-1 powered on and read On: want an attempt on bmh-2; got %+v", d)
	}
}
