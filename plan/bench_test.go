package plan_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

func bigFleet(n int) []plan.Server {
	out := make([]plan.Server, n)
	for i := range out {
		out[i] = plan.Server{UUID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), Hostname: fmt.Sprintf("cn%05d", i),
			Platform: "20150101T000000Z", Core: i < 3, Headnode: i == 0}
	}
	return out
}

func BenchmarkCreate10000(b *testing.B) {
	fleet := bigFleet(10_000)
	o := plan.CreateOptions{UUID: "p", Target: "20151001T000000Z", Select: plan.SelectAll, Concurrency: plan.Percent(5)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := plan.Create(fleet, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNext10000 measures one decision over a 10,000-server plan in
// the middle of its run: 3,000 done, 500 in flight, the rest pending.
func BenchmarkNext10000(b *testing.B) {
	p, _, err := plan.Create(bigFleet(10_000), plan.CreateOptions{UUID: "p", Target: "20151001T000000Z",
		Select: plan.SelectAll, Concurrency: plan.Count(500)})
	if err != nil {
		b.Fatal(err)
	}
	p.State = plan.StateRunning
	now := fake.Epoch.Add(time.Hour)
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true}
	for i := range p.Reboots {
		r := &p.Reboots[i]
		switch {
		case i < 3000:
			r.Step = plan.StepDone
		case i < 3500:
			r.Step, r.JobUUID, r.StepSince = plan.StepJob, plan.JobUUID(plan.Plan{UUID: "p"}, r.ServerUUID), &now
			obs.Jobs[r.JobUUID] = plan.JobObs{Exists: true, Started: true, Drained: true}
		}
		obs.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
	}
	b.ReportAllocs()
	for b.Loop() {
		plan.Next(p, obs, now)
	}
}

// BenchmarkMakespan runs one simulated datacenter (3 core servers, 200
// others, log-normal reboot times, concurrency 10) through the real
// Executor, and reports the makespan of the sliding window against the
// original tool's fixed batches (computed on the same reboot times) and
// against a lower bound (core in series, then perfect packing, never less
// than the longest reboot).
func BenchmarkMakespan(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 7))
	logn := func(m time.Duration, s float64) time.Duration {
		return time.Duration(float64(m) * math.Exp(s*rng.NormFloat64())).Round(time.Second)
	}
	var fs []fake.FleetServer
	for i := 0; i < 203; i++ {
		fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
			Core: i < 3, Headnode: i == 0, Queue: 10 * time.Second, Drain: logn(30*time.Second, 1),
			Shutdown: 20 * time.Second, Boot: logn(4*time.Minute, 0.6), Services: logn(time.Minute, 0.8)})
	}
	const conc = 10
	var sliding time.Duration
	for b.Loop() {
		o := opts()
		o.Concurrency = plan.Count(conc)
		w := newWorld(b, fs, "", o)
		w.runUntilDone(5*time.Second, 1_000_000)
		sliding = w.clk.Now().Sub(fake.Epoch)
	}
	var core, sum, longest time.Duration
	var rest []time.Duration
	for _, s := range fs {
		if s.Core {
			core += s.RebootTime()
			continue
		}
		rest = append(rest, s.RebootTime())
		sum += s.RebootTime()
		longest = max(longest, s.RebootTime())
	}
	lower := core + max(sum/conc, longest)
	batches := core
	for i := 0; i < len(rest); i += conc {
		bt := append([]time.Duration(nil), rest[i:min(i+conc, len(rest))]...)
		sort.Slice(bt, func(x, y int) bool { return bt[x] > bt[y] })
		batches += bt[0]
	}
	b.ReportMetric(sliding.Minutes(), "sliding-min")
	b.ReportMetric(batches.Minutes(), "batches-min")
	b.ReportMetric(lower.Minutes(), "lowerbound-min")
	b.ReportMetric(float64(batches)/float64(sliding), "batches/sliding")
	b.ReportMetric(float64(sliding)/float64(lower), "sliding/lowerbound")
}
