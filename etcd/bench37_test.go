package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// BenchmarkCommandLatency measures how long an operator's stop (then run)
// takes to land on a running plan of 100,000 servers while its executor
// runs passes back to back (issue 37, point 1), at 5 % and 50 %
// concurrency: ms per command, and the executor's ms per pass meanwhile.
// Slow to set up: run it alone, e.g.
//
//	go test -run '^$' -bench CommandLatency -benchtime 5x ./
func BenchmarkCommandLatency(b *testing.B) {
	for _, conc := range []int{5_000, 50_000} {
		b.Run(fmt.Sprintf("servers=100000/concurrency=%d", conc), func(b *testing.B) {
			r := newBigRun(b, 100_000, conc)
			ctx := context.Background()
			for i := 0; i < 12; i++ {
				if err := r.pass(ctx); err != nil {
					b.Fatal(err)
				}
			}
			stop := r.executor(b)
			var worst time.Duration
			var took time.Duration
			for b.Loop() {
				for _, f := range []func(plan.Plan) (plan.Plan, error){plan.Stop, plan.Run} {
					b.StopTimer()
					time.Sleep(300 * time.Millisecond) // let passes write between commands
					b.StartTimer()
					t0 := time.Now()
					if _, err := plan.Command(ctx, r.store, r.uuid, f); err != nil {
						b.Fatal(err)
					}
					worst = max(worst, time.Since(t0))
					took += time.Since(t0)
				}
			}
			passes, err := stop()
			if err != nil {
				b.Log(err) // conflicts with the operator are expected
			}
			b.ReportMetric(float64(worst.Milliseconds()), "worst-ms/command")
			b.ReportMetric(float64(took.Milliseconds())/float64(2*b.N), "ms/command")
			b.ReportMetric(float64(passes), "passes")
		})
	}
}

// BenchmarkFinishedPlanBytes measures what a finished plan of 100,000
// servers holds in etcd (keys and values), before and after retention
// (Prune replaces it with its summary) (issue 37, point 3).
func BenchmarkFinishedPlanBytes(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		r := newBigRun(b, 100_000, 5_000)
		at := r.clk.Now()
		p, err := r.store.Get(ctx, r.uuid)
		if err != nil {
			b.Fatal(err)
		}
		// Every reboot done, as a finished plan holds them.
		for i := range p.Reboots {
			rb := &p.Reboots[i]
			rb.Step, rb.JobUUID, rb.StartedAt, rb.FinishedAt, rb.OperationalAt, rb.StepSince, rb.DrainSince =
				plan.StepDone, plan.JobUUID(p, rb.ServerUUID), &at, &at, &at, &at, &at
			rb.JobSeen = true
			rb.Phases = &plan.Phases{Drained: &at, Off: &at, On: &at, Healthy: &at}
		}
		p.State = plan.StateComplete
		if err := r.store.Put(ctx, p); err != nil {
			b.Fatal(err)
		}
		pre := r.store.prefix
		keys, before := prefixBytes(b, r.store.cli, pre+"pages/")
		hk, hb := prefixBytes(b, r.store.cli, pre+"headers/")
		if _, err := r.store.Prune(ctx, at, at); err != nil {
			b.Fatal(err)
		}
		pruned, err := r.store.Prune(ctx, at.Add(time.Hour), at.Add(time.Minute))
		if err != nil || len(pruned) != 1 {
			b.Fatal(pruned, err)
		}
		_, after := prefixBytes(b, r.store.cli, pre+"summaries/")
		b.ReportMetric(float64(keys+hk), "keys-before")
		b.ReportMetric(float64(before+hb), "bytes-before")
		b.ReportMetric(float64(after), "bytes-after")
	}
}
