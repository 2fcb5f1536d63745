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
	fs := makespanFleet()
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

// makespanFleet is BenchmarkMakespan's datacenter: 3 core servers and 200
// others in 20 racks of 10 (cn000-cn009 in r00, and so on), log-normal
// reboot times (seeded: the same every run).
func makespanFleet() []fake.FleetServer {
	rng := rand.New(rand.NewPCG(42, 7))
	logn := func(m time.Duration, s float64) time.Duration {
		return time.Duration(float64(m) * math.Exp(s*rng.NormFloat64())).Round(time.Second)
	}
	var fs []fake.FleetServer
	for i := 0; i < 203; i++ {
		fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
			Core: i < 3, Headnode: i == 0, Queue: 10 * time.Second, Drain: logn(30*time.Second, 1),
			Shutdown: 20 * time.Second, Boot: logn(4*time.Minute, 0.6), Services: logn(time.Minute, 0.8)})
		if i >= 3 {
			fs[i].Labels = map[string]string{"rack": fmt.Sprintf("r%02d", (i-3)/10)}
		}
	}
	return fs
}

// BenchmarkMakespanRack is BenchmarkMakespan's datacenter and plan
// (concurrency 10) with at most one server per rack offline: the
// makespan in the plan's order (racks interleaved), in hostname order
// (the racks one after the other), and without the limit, against the
// lower bound of the rack-limited plan: core in series, then the longest
// of perfect packing, the longest reboot and the longest rack (its
// reboots in series).
func BenchmarkMakespanRack(b *testing.B) {
	fs := makespanFleet()
	const conc = 10
	run := func(limit, hostOrder bool) time.Duration {
		o := opts()
		o.Concurrency = plan.Count(conc)
		if limit {
			o.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: 1}}
		}
		w := newWorld(b, fs, "", o)
		if hostOrder {
			if _, err := plan.Edit(w.ctx, w.store, w.uuid, func(p plan.Plan) (plan.Plan, error) {
				q := p.Clone()
				sort.SliceStable(q.Reboots, func(i, j int) bool {
					return q.Reboots[i].Core && !q.Reboots[j].Core || q.Reboots[i].Core == q.Reboots[j].Core && !q.Reboots[i].Core &&
						q.Reboots[i].ServerHostname < q.Reboots[j].ServerHostname
				})
				return q, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		w.runUntilDone(5*time.Second, 1_000_000)
		for _, st := range w.fleet.Starts() {
			for _, id := range st.Offline {
				if r := fs[idx(st.Server)].Labels["rack"]; limit && r != "" && fs[idx(id)].Labels["rack"] == r {
					b.Fatalf("%s started with %s offline in its rack", st.Server, id)
				}
			}
		}
		return w.clk.Now().Sub(fake.Epoch)
	}
	var rack, hostOrder, free time.Duration
	for b.Loop() {
		rack, hostOrder, free = run(true, false), run(true, true), run(false, false)
	}
	var core, sum, longest time.Duration
	racks := map[string]time.Duration{}
	for _, s := range fs {
		if s.Core {
			core += s.RebootTime()
			continue
		}
		sum += s.RebootTime()
		longest = max(longest, s.RebootTime())
		racks[s.Labels["rack"]] += s.RebootTime()
	}
	var rackMax time.Duration
	for _, d := range racks {
		rackMax = max(rackMax, d)
	}
	lower := core + max(sum/conc, longest, rackMax)
	b.ReportMetric(rack.Minutes(), "rack-min")
	b.ReportMetric(hostOrder.Minutes(), "rack-hostorder-min")
	b.ReportMetric(free.Minutes(), "nolimit-min")
	b.ReportMetric(lower.Minutes(), "lowerbound-min")
	b.ReportMetric(float64(rack)/float64(lower), "rack/lowerbound")
	b.ReportMetric(float64(hostOrder)/float64(lower), "hostorder/lowerbound")
	b.ReportMetric(float64(rack)/float64(free), "rack/nolimit")
}

// idx is the position of server "uNNN" in makespanFleet.
func idx(id string) int {
	n := 0
	fmt.Sscanf(id, "u%d", &n)
	return n
}

// benchWorld is a plan of n servers on a store, run by the real Executor
// against a simulated fleet (reboot jobs of about 6.5 minutes).
type benchWorld struct {
	clk   *fake.Clock
	fleet *fake.Fleet
	store plan.Store
	exec  *plan.Executor
	uuid  string
	runs  int
}

func newBenchWorld(b *testing.B, n int, store plan.Store) *benchWorld {
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 10 * time.Second, Drain: 30 * time.Second, Shutdown: 20 * time.Second, Boot: 4 * time.Minute, Services: time.Minute}
	}
	w := &benchWorld{clk: clk, fleet: fake.NewFleet(clk.Now, "", fs...), store: store}
	w.exec = &plan.Executor{Fleet: w.fleet, Store: store, Now: clk.Now}
	return w
}

// fresh creates and runs a new plan over the whole fleet.
func (w *benchWorld) fresh(b *testing.B, concurrency int) {
	w.runs++
	o := opts()
	o.UUID = fmt.Sprintf("plan-%d", w.runs)
	o.Concurrency = plan.Count(concurrency)
	o.CreatedAt = w.clk.Now()
	p, _, err := plan.Create(w.fleet.Servers(), o)
	if err != nil {
		b.Fatal(err)
	}
	p, _ = plan.Run(p)
	if err := w.store.Create(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	w.uuid = p.UUID
}

// midRunStore creates a plan of n servers (concurrency 25) on store and
// runs it through the real Executor for 40 passes.
func midRunStore(b *testing.B, n int, store plan.Store) *benchWorld {
	w := newBenchWorld(b, n, store)
	w.fresh(b, 25)
	for i := 0; i < 40; i++ {
		if _, err := w.exec.Pass(context.Background(), w.uuid); err != nil {
			b.Fatal(err)
		}
		w.clk.Advance(15 * time.Second)
	}
	return w
}

// pass runs one pass 30 simulated seconds after the last; when the plan
// has finished, it starts a new one first (outside the timer), so that
// every measured pass is a pass of a running plan.
func (w *benchWorld) pass(b *testing.B) {
	v, err := w.exec.Pass(context.Background(), w.uuid)
	if err != nil {
		b.Fatal(err)
	}
	w.clk.Advance(30 * time.Second)
	if !v.Unfinished() {
		b.StopTimer()
		w.fresh(b, 25)
		b.StartTimer()
	}
}

// BenchmarkPassStore measures one executor pass of a running plan (about
// 25 reboots in flight) through the real Executor and a simulated fleet:
// on the bbolt store, where a pass reads and writes a view (the header and
// the reboots in flight and next), and on the FileStore (the whole
// document every time): ms per pass and bytes written per pass.
func BenchmarkPassStore(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("bolt/servers=%d", n), func(b *testing.B) {
			st, err := plan.OpenBolt(filepath.Join(b.TempDir(), "plans.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			w := midRunStore(b, n, st)
			pages0, size := st.PagesWritten()
			passes := 0
			for b.Loop() {
				w.pass(b)
				passes++
			}
			pages, _ := st.PagesWritten()
			b.ReportMetric(float64(pages-pages0)*float64(size)/float64(passes), "bytes-written/pass")
		})
		if n > 10000 {
			continue // the whole document per pass: seconds per pass
		}
		b.Run(fmt.Sprintf("file/servers=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			w := midRunStore(b, n, plan.FileStore{Dir: dir})
			var written int64
			for b.Loop() {
				path := filepath.Join(dir, w.uuid+".json")
				before, _ := os.Stat(path)
				w.pass(b)
				if after, err := os.Stat(path); err == nil && (!after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size()) {
					written += after.Size()
				}
			}
			b.ReportMetric(float64(written)/float64(b.N), "bytes-written/pass")
		})
	}
}

// BenchmarkWholePlan runs whole plans through the real Executor, the
// bbolt store and a simulated fleet (concurrency 1%, a pass every 30
// simulated seconds): wall time, passes and bytes written per plan.
func BenchmarkWholePlan(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			st, err := plan.OpenBolt(filepath.Join(b.TempDir(), "plans.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			w := newBenchWorld(b, n, st)
			passes := 0
			var written int64
			for b.Loop() {
				b.StopTimer()
				w.fresh(b, max(n/100, 1))
				pages0, size := st.PagesWritten()
				b.StartTimer()
				for {
					v, err := w.exec.Pass(context.Background(), w.uuid)
					if err != nil {
						b.Fatal(err)
					}
					passes++
					if !v.Unfinished() {
						break
					}
					w.clk.Advance(30 * time.Second)
				}
				pages, _ := st.PagesWritten()
				written += (pages - pages0) * int64(size)
				if v, _ := st.Get(context.Background(), w.uuid); v.State != plan.StateComplete {
					b.Fatalf("plan ended %s", v.State)
				}
			}
			b.ReportMetric(float64(passes)/float64(b.N), "passes/plan")
			b.ReportMetric(float64(written)/float64(b.N), "bytes-written/plan")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(passes), "ms/pass")
		})
	}
}
