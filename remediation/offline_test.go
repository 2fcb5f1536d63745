package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestDeletedMachineOwnerKeepsHostOff_AdmissionReleased: a Machine
// deleted after its request powered its host off, the request removed,
// and the host's owner then releases it (Online false and deprovisioned,
// as Cluster API's metal3 provider does when it releases a host): the reboot
// controller keeps it off for its owner ("held while Online is false")
// and never powers it on, so LastPoweredOn never passes the request. The
// remediation no longer holds it and its admission (the storm guard's
// count) is released. Counter-cases from the same world: Online true (the
// controller is to power the host on: held until it does), Online false
// with the Machine's request still on the host (held by it), and a store
// not known to fill Online with its owner's wish
// (RebootAPIHosts.OwnerOnline false: its zero value says nothing; held as
// before).
// Before: held for good in the first case too (OffAfterRequest, never
// PoweredOn).
func TestDeletedMachineOwnerKeepsHostOff_AdmissionReleased(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	req := remediation.Request{Value: remediation.RebootValue("u1", t0), At: t0, Host: "h1"}
	for _, tc := range []struct {
		name     string
		online   bool
		request  bool
		owner    bool // RebootAPIHosts.OwnerOnline
		released bool
		deprov   bool // reboot.Host.Unprovisioned: released and deprovisioned
	}{
		{"owner keeps it off, no request", false, false, true, true, true},
		{"owner wants it on, not on yet", true, false, true, false, true},
		{"owner keeps it off, the request still on it", false, true, true, false, true},
		{"Online not known to be the owner's (OwnerOnline false)", false, false, false, false, true},
		// Review 40p: Online false on a host never deprovisioned is one
		// reading its owner may take back (a blip): held.
		{"owner's Online false, host not deprovisioned", false, false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewCluster()
			c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
			h := reboot.Host{Name: "h1", Online: tc.online, Unprovisioned: tc.deprov,
				Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute)}}
			if tc.request {
				h.Annotations = map[string]string{remediation.RebootAnnotation: req.Value}
			}
			hosts := fake.NewRebootHosts(h)
			rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: tc.owner,
				HostOf: func(ctx context.Context, m string) (string, error) {
					if _, err := c.Get(ctx, m); err != nil {
						return "", err
					}
					return "h1", nil
				}}
			a, _ := c.GetAdmissions(ctx)
			a.Machines = []string{"m1"}
			a.Requests = map[string]remediation.Request{"m1": req}
			if err := c.PutAdmissions(ctx, a); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, "m1"); err != nil {
				t.Fatal(err)
			}
			if tc.request {
				// What the store reads while the request is on the host:
				// never Offline, whatever Online says; held.
				got, err := rh.ReadRequest(ctx, "m1", req)
				if err != nil || got.Offline || !got.Requested ||
					!remediation.Held(remediation.State{Phase: remediation.PhaseFailed, Host: "h1"}, got) {
					t.Fatalf("the request on the host, Online false: read %+v (%v); want Requested, not Offline, held", got, err)
				}
				return
			}
			r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Hosts: rh, Admissions: c, Now: time.Now}
			_, err := r.Reconcile(ctx, "m1")
			a, _ = c.GetAdmissions(ctx)
			hh, _ := hosts.Get(ctx, "h1")
			if released := !a.Has("m1"); released != tc.released {
				t.Fatalf("admission released %v, want %v (host online %v, annotations %v, last powered off %v after the request, never on since; reconcile: %v)",
					released, tc.released, hh.Online, hh.Annotations, hh.Status.LastPoweredOff.Sub(t0), err)
			}
		})
	}
}
