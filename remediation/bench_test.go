package remediation_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

var decSink remediation.Decision

func BenchmarkDecide(b *testing.B) {
	o := remediation.Observed{
		Machine: remediation.Machine{Name: "m", UID: "u", NeedsRemediation: true, NodeName: "n"},
		Node: remediation.Node{Exists: true, Name: "n", Ready: true,
			Labels: map[string]string{"a": "1", "b": "2", "c": "3"}, Annotations: map[string]string{"x": "y"}},
		Host: remediation.Host{Power: power.StateOn},
		State: remediation.State{Phase: remediation.PhaseWaitingForNode, Attempt: 1, Started: fake.Epoch,
			Backup: &remediation.NodeBackup{Name: "n", Labels: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}}},
		MayStart: true,
	}
	now := fake.Epoch.Add(time.Minute)
	b.Run("waiting-for-node-restore", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decSink = remediation.Decide(o, now)
		}
	})
	start := o
	start.State = remediation.State{}
	b.Run("start", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decSink = remediation.Decide(start, now)
		}
	})
}

func BenchmarkMayStart10000(b *testing.B) {
	fleet := make([]remediation.FleetMachine, 10_000)
	for i := range fleet {
		fleet[i] = remediation.FleetMachine{Name: fmt.Sprintf("m%05d", i), ControlPlane: i < 3,
			Unhealthy: i%50 == 0, Remediating: i%200 == 0}
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = remediation.MayStart(fleet, "m09999", remediation.MaxPercent(5))
	}
}
