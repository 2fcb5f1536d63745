package plan_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// midRunStore creates a plan of n servers (concurrency 25) on store, runs
// it through the real Executor for a while, and returns the world.
func midRunStore(b *testing.B, n int, store plan.Store) (*fake.Clock, *plan.Executor, string) {
	clk := fake.NewClock(time.Time{})
	var fs []fake.FleetServer
	for i := 0; i < n; i++ {
		fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 10 * time.Second, Drain: 30 * time.Second, Shutdown: 20 * time.Second, Boot: 4 * time.Minute, Services: time.Minute})
	}
	fleet := fake.NewFleet(clk.Now, "", fs...)
	o := opts()
	o.Concurrency = plan.Count(25)
	o.CreatedAt = clk.Now()
	p, _, err := plan.Create(fleet.Servers(), o)
	if err != nil {
		b.Fatal(err)
	}
	p, _ = plan.Run(p)
	if err := store.Create(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	exec := &plan.Executor{Fleet: fleet, Store: store, Now: clk.Now}
	for i := 0; i < 40; i++ {
		if _, err := exec.Pass(context.Background(), p.UUID); err != nil {
			b.Fatal(err)
		}
		clk.Advance(15 * time.Second)
	}
	return clk, exec, p.UUID
}

// BenchmarkPassStore measures one executor pass mid-run (25 reboots in
// flight) through the real Executor and a simulated fleet, on the bbolt
// store (one record per reboot, only changed records written) and on the
// FileStore (the whole document every time): ms per pass and bytes written
// per pass, 30 simulated seconds apart.
func BenchmarkPassStore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("bolt/servers=%d", n), func(b *testing.B) {
			st, err := plan.OpenBolt(filepath.Join(b.TempDir(), "plans.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			clk, exec, uuid := midRunStore(b, n, st)
			pages0, size := st.PagesWritten()
			passes := 0
			for b.Loop() {
				if _, err := exec.Pass(context.Background(), uuid); err != nil {
					b.Fatal(err)
				}
				clk.Advance(30 * time.Second)
				passes++
			}
			pages, _ := st.PagesWritten()
			b.ReportMetric(float64(pages-pages0)*float64(size)/float64(passes), "bytes-written/pass")
		})
		b.Run(fmt.Sprintf("file/servers=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			st := plan.FileStore{Dir: dir}
			clk, exec, uuid := midRunStore(b, n, st)
			fi, _ := os.Stat(filepath.Join(dir, uuid+".json"))
			writes := 0
			for b.Loop() {
				before, _ := os.Stat(filepath.Join(dir, uuid+".json"))
				if _, err := exec.Pass(context.Background(), uuid); err != nil {
					b.Fatal(err)
				}
				if after, _ := os.Stat(filepath.Join(dir, uuid+".json")); !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
					writes++
				}
				clk.Advance(30 * time.Second)
			}
			b.ReportMetric(float64(writes)*float64(fi.Size())/float64(b.N), "bytes-written/pass")
		})
	}
}
