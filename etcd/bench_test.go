package etcd

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// BenchmarkPass measures one executor pass of a running plan (a pass
// every 30 simulated seconds) led through etcd: the confirmation of the
// leadership, the view read, the decision, and the fenced write; ms per
// pass, bytes written and write transactions per pass. At 10,000 and
// 100,000 servers with 25 reboots in flight, and at 100,000 with 5,000
// (5 %) and 50,000 (50 %): there a pass changes more pages than one
// transaction holds. The
// embedded etcd of the tests does not fsync (see etcdtest.Start); with
// REBOOTKIT_BENCH_ETCD=process and REBOOTKIT_ETCD_BIN the package's tests
// and benchmarks run against an etcd server process instead (doc.go gives
// the numbers). cpu-ms/pass is this process's CPU time per pass (the
// executor's and the fake fleet's), which the machine's load distorts less
// than the wall time. rpcs/pass and rpc-ms/pass are the calls to etcd a
// pass makes and the wall time it waits for their answers (round trips,
// etcd's work, fsync included; the client's encoding too, which is also
// in cpu-ms/pass): on a machine that is not loaded, a pass's wall time is
// about its CPU time plus that wait.
func BenchmarkPass(b *testing.B) {
	for _, c := range []struct{ n, conc int }{{10_000, 25}, {100_000, 25}, {100_000, 5_000}, {100_000, 50_000}} {
		n := c.n
		b.Run(fmt.Sprintf("servers=%d/concurrency=%d", c.n, c.conc), func(b *testing.B) {
			ctx := context.Background()
			cli, rpcs := timedClient(b)
			pre := prefix(b)
			clk := fake.NewClock(time.Time{})
			fs := make([]fake.FleetServer, n)
			for i := range fs {
				fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
					Queue: 10 * time.Second, Drain: 30 * time.Second, Shutdown: 20 * time.Second, Boot: 4 * time.Minute, Services: time.Minute}
			}
			fleet := fake.NewFleet(clk.Now, "", fs...)
			p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "bench", Target: "2", Select: plan.SelectAll,
				Concurrency: plan.Count(c.conc), CreatedAt: clk.Now()})
			if err != nil {
				b.Fatal(err)
			}
			p, _ = plan.Run(p)
			if err := NewStore(cli, pre).Create(ctx, p); err != nil {
				b.Fatal(err)
			}
			cand := Candidate{Client: cli, Prefix: pre, ID: "bench", TTL: 60}
			s, err := cand.NewSession(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			l, err := cand.Campaign(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			pass := func() {
				if err := l.Pass(ctx, fleet, plan.Config{}, clk.Now, nil); err != nil {
					b.Fatal(err)
				}
				clk.Advance(30 * time.Second)
			}
			for i := 0; i < 40; i++ {
				pass()
			}
			txns0, bytes0 := l.Store.Written()
			cpu0 := cpuTime(b)
			calls0, wait0 := rpcs()
			for b.Loop() {
				pass()
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pass")
			calls, wait := rpcs()
			b.ReportMetric(float64(calls-calls0)/float64(b.N), "rpcs/pass")
			b.ReportMetric(float64((wait-wait0).Microseconds())/1000/float64(b.N), "rpc-ms/pass")
			txns, bytes := l.Store.Written()
			b.ReportMetric(float64(bytes-bytes0)/float64(b.N), "bytes-written/pass")
			b.ReportMetric(float64(txns-txns0)/float64(b.N), "txns/pass")
		})
	}
}

// BenchmarkFailover measures the time from the leader's death (its client
// gone without a goodbye, so that its lease must expire) to the moment the
// next candidate leads, at the default lease TTL.
func BenchmarkFailover(b *testing.B) {
	ctx := context.Background()
	var total time.Duration
	for b.Loop() {
		pre := prefix(b)
		dead := newClient(b)
		a := Candidate{Client: dead, Prefix: pre, ID: "a"}
		sa, err := a.NewSession(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Campaign(ctx, sa); err != nil {
			b.Fatal(err)
		}
		other := Candidate{Client: newClient(b), Prefix: pre, ID: "b"}
		sb, err := other.NewSession(ctx)
		if err != nil {
			b.Fatal(err)
		}
		won := make(chan time.Time, 1)
		go func() {
			if _, err := other.Campaign(ctx, sb); err == nil {
				won <- time.Now()
			}
		}()
		time.Sleep(100 * time.Millisecond)
		died := time.Now()
		dead.Close() // no revoke: the lease expires
		select {
		case at := <-won:
			total += at.Sub(died)
		case <-time.After(3 * DefaultTTL * time.Second):
			b.Fatal("no takeover")
		}
		sb.Close()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-new-leader")
}

// cpuTime is the CPU time (user and system) this process used so far: the
// executor's side of a pass (with the fake fleet's), whatever else the
// machine runs, which a pass's wall time is not.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timedClient returns a client of the tests' etcd that counts its unary
// calls and the wall time spent waiting for them, and a function that
// returns both so far.
func timedClient(b *testing.B) (*clientv3.Client, func() (calls int64, wait time.Duration)) {
	var n, ns atomic.Int64
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		t0 := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		ns.Add(int64(time.Since(t0)))
		n.Add(1)
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(icpt)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli, func() (int64, time.Duration) { return n.Load(), time.Duration(ns.Load()) }
}
