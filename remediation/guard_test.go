package remediation_test

import (
	"fmt"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"

	"github.com/rebootkit/rebootkit/remediation"
	"pgregory.net/rapid"
)

func TestLimitRoundsDown(t *testing.T) {
	tests := []struct {
		l     remediation.MaxUnhealthy
		total int
		want  int
	}{
		{remediation.MaxPercent(10), 15, 1}, // 1.5 -> 1
		{remediation.MaxPercent(10), 9, 0},  // 0.9 -> 0: no remediation
		{remediation.MaxPercent(40), 5, 2},
		{remediation.MaxPercent(33), 3, 0}, // 0.99 -> 0
		{remediation.MaxPercent(34), 3, 1}, // 1.02 -> 1
		{remediation.MaxPercent(100), 7, 7},
		{remediation.MaxCount(2), 100, 2},
		{remediation.MaxUnhealthy{}, 12, 12},
	}
	for i, tt := range tests {
		if got := tt.l.Of(tt.total); got != tt.want {
			t.Errorf("step %d: %s of %d = %d, want %d", i, tt.l, tt.total, got, tt.want)
		}
	}
}

func TestMayStart(t *testing.T) {
	fleet := []remediation.FleetMachine{
		{Name: "cp0", ControlPlane: true, Remediating: true},
		{Name: "cp1", ControlPlane: true, Unhealthy: true},
		{Name: "w0", Unhealthy: true},
		{Name: "w1"}, {Name: "w2"}, {Name: "w3"},
	}
	tests := []struct {
		cand  string
		limit remediation.MaxUnhealthy
		want  bool
	}{
		{"cp1", remediation.MaxUnhealthy{}, false}, // one control-plane machine at a time
		{"cp0", remediation.MaxCount(0), true},     // already remediating: go on
		{"w0", remediation.MaxCount(3), true},      // cp0 + cp1 + w0 = 3
		{"w0", remediation.MaxCount(2), false},     // in-flight and unhealthy count
		{"w0", remediation.MaxPercent(50), true},   // 3 of 6
		{"w0", remediation.MaxPercent(49), false},  // 2.94 -> 2
		{"nope", remediation.MaxUnhealthy{}, false},
	}
	for i, tt := range tests {
		got, why := remediation.MayStart(fleet, tt.cand, tt.limit)
		if got != tt.want {
			t.Errorf("step %d: MayStart(%s, %s) = %v (%s), want %v", i, tt.cand, tt.limit, got, why, tt.want)
		}
	}
}

// TestMayStartCountsANodeOnce: two remediations of one Node (two health
// checkers each made one) are one unhealthy machine of a fleet of three
// Nodes, so a limit of 1 lets one of them start; before, the guard counted
// them as two unhealthy machines of four and held both for good.
func TestMayStartCountsANodeOnce(t *testing.T) {
	fleet := []remediation.FleetMachine{
		{Name: "r-a", Node: "n0", Unhealthy: true},
		{Name: "r-b", Node: "n0", Unhealthy: true},
		{Name: "node/n1", Node: "n1"}, {Name: "node/n2", Node: "n2"},
	}
	if ok, why := remediation.MayStart(fleet, "r-a", remediation.MaxCount(1)); !ok {
		t.Errorf("MayStart(r-a, limit 1) = false (%s): two remediations of one Node counted twice", why)
	}
	if ok, _ := remediation.MayStart(fleet, "r-a", remediation.MaxPercent(34)); !ok {
		t.Errorf("MayStart(r-a, 34%%) = false: one of three Nodes is 1 (the fleet is three Nodes)")
	}
	fleet = append(fleet, remediation.FleetMachine{Name: "r-c", Node: "n1", Remediating: true})
	if ok, _ := remediation.MayStart(fleet, "r-a", remediation.MaxCount(1)); ok {
		t.Errorf("MayStart(r-a, limit 1) = true with n1 remediating: two Nodes unhealthy")
	}
}

// TestMayStartNeverExceeds: starting remediations one by one through the
// guard never puts more machines in flight than the limit allows.
func TestMayStartNeverExceeds(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "n")
		fleet := make([]remediation.FleetMachine, n)
		for i := range fleet {
			fleet[i] = remediation.FleetMachine{Name: fmt.Sprint(i), ControlPlane: i < 3,
				Unhealthy: rapid.Bool().Draw(t, "unhealthy")}
		}
		limit := remediation.MaxCount(rapid.IntRange(0, n).Draw(t, "count"))
		if rapid.Bool().Draw(t, "percent") {
			limit = remediation.MaxPercent(rapid.IntRange(0, 100).Draw(t, "pct"))
		}
		for step := 0; step < 3*n; step++ {
			i := rapid.IntRange(0, n-1).Draw(t, "who")
			if !fleet[i].Unhealthy || fleet[i].Remediating {
				continue
			}
			if ok, _ := remediation.MayStart(fleet, fleet[i].Name, limit); ok {
				fleet[i].Remediating = true
			}
			inFlight, cp := 0, 0
			for _, m := range fleet {
				if m.Remediating {
					inFlight++
					if m.ControlPlane {
						cp++
					}
				}
			}
			if inFlight > limit.Of(n) || cp > 1 {
				t.Fatalf("%d in flight (%d control plane), limit %s of %d", inFlight, cp, limit, n)
			}
		}
	})
}
