package remediation_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestTableLoopsPhasedDoesNot reproduces what broke the one real
// implementation of the stateless table: once the node is deleted and the
// needs-remediation annotation removed, the health checker sees a Machine
// without a node and re-adds its annotation, and the table reboots the host
// again, and again. The phased mode keeps the annotation until the node is
// back, so one failure costs one power cycle. (Servers that boot slower
// than the health checker's timeout are the case the seed's assumptions
// section worries about.)
func TestTableLoopsPhasedDoesNot(t *testing.T) {
	cycles := func(table bool) int {
		s := newSim(3, remediation.Config{}, table, remediation.MaxUnhealthy{})
		s.broken["m1"] = true // hung kernel: the node goes NotReady, the host stays on
		// Bare metal boots slower than the health checker's timeout.
		s.boot, s.mhcAfter = 90*time.Second, 40*time.Second
		for i := 0; i < 120; i++ { // 10 minutes
			s.step(5 * time.Second)
		}
		if len(s.failures) > 0 {
			t.Fatalf("table=%v: %v", table, s.failures)
		}
		offs := 0
		for _, tr := range s.powers["h1"].Transitions() {
			if tr.To == power.StateOff {
				offs++
			}
		}
		if !table && (s.powers["h1"].Current() != power.StateOn || !s.cluster.Node("n1").Ready) {
			t.Errorf("phased mode: host %v, node ready %v after 10 minutes", s.powers["h1"].Current(), s.cluster.Node("n1").Ready)
		}
		return offs
	}
	table, phased := cycles(true), cycles(false)
	t.Logf("power-offs of the failed host in 10 minutes: table %d, phased %d", table, phased)
	if phased != 1 {
		t.Errorf("phased mode: %d power-offs for one failure, want 1", phased)
	}
	if table < 3 {
		t.Errorf("table mode: %d power-offs; the loop was expected to show", table)
	}
}
