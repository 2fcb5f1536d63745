package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestMerge41_GoneMembersThenOthersCounted: the storm guard counts a gone
// admitted Machine where its admission recorded it (Admissions.Members:
// cluster d, not the candidate's c) and, on top of that, another
// controller's admission sharing the record (Admissions.Others) in the
// candidate's scope. Fleet c: m1 (the candidate, unhealthy), m2, m3; one
// other admission; gone g recorded in cluster d. The truth in c is 2
// unhealthy of 3: MaxCount(2) admits m1 (a g counted in c, as an older
// record's would be, makes it 3 and refuses), MaxCount(1) refuses it (the
// other controller's admission left out makes it 1 and admits). Ground
// truth: whether a reboot request reached m1's host h1.
func TestMerge41_GoneMembersThenOthersCounted(t *testing.T) {
	for _, tc := range []struct {
		limit remediation.MaxUnhealthy
		admit bool
	}{{remediation.MaxCount(2), true}, {remediation.MaxCount(1), false}} {
		t.Run(tc.limit.String(), func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewCluster()
			c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c", NeedsRemediation: true})
			c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "n2", Cluster: "c"})
			c.AddMachine(remediation.Machine{Name: "m3", UID: "u3", NodeName: "n3", Cluster: "c"})
			hosts := fake.NewRebootHosts(reboot.Host{Name: "h1"})
			a, _ := c.GetAdmissions(ctx)
			a.Machines = []string{"g"}
			a.Members = map[string]remediation.Member{"g": {Cluster: "d", Wrote: true}}
			a.Others = map[string]string{"pcr-1": "h9"}
			if err := c.PutAdmissions(ctx, a); err != nil {
				t.Fatal(err)
			}
			r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Limit: tc.limit,
				Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
			res, err := r.Reconcile(ctx, "m1")
			if err != nil {
				t.Fatal(err)
			}
			h1, _ := hosts.Get(ctx, "h1")
			a, _ = c.GetAdmissions(ctx)
			if got := len(h1.Annotations) > 0; got != tc.admit || a.Has("m1") != tc.admit {
				t.Fatalf("%s, truth 2 unhealthy of 3 in cluster c: want admitted %v, got admitted %v, h1's annotations %v (%s)",
					tc.limit, tc.admit, a.Has("m1"), h1.Annotations, res.Decision.Reason)
			}
			if a.Others["pcr-1"] != "h9" || a.Members["g"].Cluster != "d" {
				t.Fatalf("the pass changed what it does not own: %+v", a)
			}
			if tc.admit && (a.Members["m1"].Cluster != "c" || a.Requests["m1"].Host != "h1") {
				t.Fatalf("m1 admitted without its member and its request recorded: %+v", a)
			}
		})
	}
}
