package nodereuse_test

import (
	"fmt"
	"testing"

	"github.com/rebootkit/rebootkit/nodereuse"
)

func fleet(n int) []nodereuse.Host {
	hosts := make([]nodereuse.Host, n)
	for i := range hosts {
		h := nodereuse.Host{Name: fmt.Sprintf("host-%06d", i), State: nodereuse.StateAvailable,
			Labels: map[string]string{"rack": fmt.Sprintf("r%d", i%20)}, FailureDomain: fmt.Sprintf("fd%d", i%3)}
		switch i % 10 {
		case 0:
			h.Labels[nodereuse.Label] = "md-workers"
		case 1:
			h.Labels[nodereuse.Label] = "md-other"
		case 2, 3, 4:
			h.ConsumerRef = "m"
			h.State = nodereuse.StateProvisioned
		}
		hosts[i] = h
	}
	return hosts
}

var selSink nodereuse.Selection

func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		hosts := fleet(n)
		req := nodereuse.Request{Pool: nodereuse.MachineDeployment("workers"), FailureDomain: "fd1",
			Selector: nodereuse.Selector{MatchExpressions: []nodereuse.Requirement{{Key: "rack", Operator: nodereuse.OpExists}}}}
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req.Seed++
				selSink, _ = nodereuse.Select(hosts, req)
			}
		})
	}
}

func BenchmarkSelectN(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		hosts := fleet(n)
		req := nodereuse.Request{Pool: nodereuse.MachineDeployment("workers")}
		machines := n / 10
		b.Run(fmt.Sprintf("hosts=%d/machines=%d", n, machines), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req.Seed++
				_, _ = nodereuse.SelectN(hosts, req, machines)
			}
		})
	}
}
