package fake_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestClusterRefusesEndedContext: every write of the fake Cluster's
// handles and of fake.Records fails with an ended context (cancelled, or
// ended by the clock only, as reboot.ClockBound reports after a pause)
// and changes nothing, as a store that checks ctx.Err() just before it
// writes does: a reboot.Guard's write after its lease ran out is refused
// (issue 40 round 40ai).
func TestClusterRefusesEndedContext(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	for _, e := range endedctx.From(bg) {
		c := fake.NewCluster()
		c.AddMachine(remediation.Machine{Name: "m0", NodeName: "n0", NeedsRemediation: true})
		c.PutNode(remediation.Node{Name: "n0", UID: "u0", Ready: true})
		rec, _ := c.Get(bg, "m0")
		adm, _ := c.GetAdmissions(bg)
		adm.Machines = []string{"m0"}
		nodes := c.Nodes()
		writes := map[string]error{
			"SaveState":                       c.SaveState(e.Ctx, "m0", rec.Version, remediation.State{Attempt: 7}),
			"OtherMachines().SaveState":       c.OtherMachines().SaveState(e.Ctx, "m0", rec.Version, remediation.State{Attempt: 7}),
			"PutAdmissions":                   c.PutAdmissions(e.Ctx, adm),
			"OtherAdmissions().PutAdmissions": c.OtherAdmissions().PutAdmissions(e.Ctx, adm),
			"RemoveNeedsRemediation":          c.RemoveNeedsRemediation(e.Ctx, "m0"),
			"Nodes().Delete":                  nodes.Delete(e.Ctx, "n0", "u0"),
			"Nodes().SetOutOfService":         nodes.SetOutOfService(e.Ctx, "n0", true),
			"Nodes().AddMetadata":             nodes.AddMetadata(e.Ctx, "n0", map[string]string{"l": "x"}, nil),
			"Delete":                          c.Delete(e.Ctx, "m0"),
		}
		for name, err := range writes {
			if err == nil {
				t.Errorf("%s with %s succeeded", name, e.Name)
			}
		}
		after, err := c.Get(bg, "m0")
		if err != nil || after.Version != rec.Version || !after.Machine.NeedsRemediation || after.State.Attempt != 0 {
			t.Errorf("with %s: machine %+v version %q (was %q), %v: a write landed", e.Name, after, after.Version, rec.Version, err)
		}
		if a, _ := c.GetAdmissions(bg); a.Has("m0") {
			t.Errorf("with %s: admissions %v: a write landed", e.Name, a.Machines)
		}
		if n := c.Node("n0"); !n.Exists || n.OutOfService || n.Labels["l"] != "" {
			t.Errorf("with %s: node %+v: a write landed", e.Name, n)
		}

		rs := fake.NewRecords(remediation.Record{Name: "r0"})
		r, _ := rs.Get(bg, "r0")
		late := r
		late.OutOfService = true
		if _, err := rs.Update(e.Ctx, late); err == nil {
			t.Errorf("Records.Update with %s succeeded", e.Name)
		}
		if got, _ := rs.Get(bg, "r0"); got.Version != r.Version || got.OutOfService {
			t.Errorf("with %s: record %+v (version was %q): the write landed", e.Name, got, r.Version)
		}
	}
}
