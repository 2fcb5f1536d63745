// Command rolling-reboot runs a rolling reboot plan on etcd with two
// executors: one on the headnode, one on another machine. The plan reboots
// the headnode first; the executor on it dies with it (no goodbye: its
// lease simply stops being renewed), and the other one takes over within
// the lease TTL. It prints the gap without an executor next to what a
// single executor on the headnode would have had (the headnode's whole
// reboot, plus its own restart).
//
// Everything is simulated in real time on this machine: an embedded etcd,
// a fake fleet whose reboots take seconds instead of minutes.
//
//	go run ./examples/rolling-reboot            (from the etcd/ directory)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/etcd"
	"github.com/rebootkit/rebootkit/etcd/etcdtest"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

func main() {
	o := options{}
	flag.IntVar(&o.servers, "servers", 12, "servers in the plan (the headnode, two core servers, the rest)")
	flag.IntVar(&o.concurrency, "concurrency", 3, "servers offline at once")
	flag.IntVar(&o.ttl, "ttl", 2, "lease TTL of the executors, seconds (the library's default is 5)")
	flag.DurationVar(&o.headBoot, "headnode-boot", 6*time.Second, "how long the headnode takes to boot")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "rolling-reboot:", err)
		os.Exit(1)
	}
}

type options struct {
	servers, concurrency, ttl int
	headBoot                  time.Duration
}

func run(w io.Writer, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "rolling-reboot-etcd")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, endpoint, err := etcdtest.Start(dir, false)
	if err != nil {
		return err
	}
	defer srv.Close()
	dial := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}
	start := time.Now()
	el := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }

	var fs []fake.FleetServer
	for i := 0; i < o.servers; i++ {
		s := fake.FleetServer{UUID: fmt.Sprintf("cn%02d", i), Hostname: fmt.Sprintf("cn%02d", i), Platform: "1", Core: i < 3, Headnode: i == 0,
			Queue: 100 * time.Millisecond, Drain: 300 * time.Millisecond, Shutdown: 200 * time.Millisecond,
			Boot: time.Second + time.Duration(i%4)*300*time.Millisecond, Services: 500 * time.Millisecond}
		if s.Headnode {
			s.UUID, s.Hostname, s.Boot = "headnode", "headnode", o.headBoot
		}
		fs = append(fs, s)
	}
	fleet := fake.NewFleet(time.Now, "", fs...)
	fleet.SetExecutorElsewhere(true) // the fleet's API stays up; the executor on the headnode does not
	const prefix = "/rebootkit/example/"
	operator, err := dial()
	if err != nil {
		return err
	}
	defer operator.Close()
	auth := etcd.Candidate{Client: operator, Prefix: prefix}
	fleet.SetFenceCheck(func(token int64) error { return auth.CheckLeader(ctx, token) })
	store := etcd.NewStore(operator, prefix)
	p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "example", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(o.concurrency), CreatedAt: time.Now()})
	if err != nil {
		return err
	}
	if p, err = plan.Run(p); err != nil {
		return err
	}
	if err := store.Create(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(w, "plan %s: %d servers (3 core, headnode first), concurrency %d, on embedded etcd; executors 'headnode' and 'cn-other', lease TTL %ds\n",
		p.UUID, len(p.Reboots), p.Concurrency, o.ttl)

	var mu sync.Mutex
	type lead struct {
		who string
		at  time.Duration
	}
	var leads []lead
	startExecutor := func(id string) (context.CancelFunc, *clientv3.Client, error) {
		cli, err := dial()
		if err != nil {
			return nil, nil, err
		}
		ectx, ecancel := context.WithCancel(ctx)
		e := &etcd.Executor{Candidate: etcd.Candidate{Client: cli, Prefix: prefix, ID: id, TTL: o.ttl}, Fleet: fleet,
			Config:   plan.Config{DrainTimeout: time.Minute, JobTimeout: time.Minute, ServicesTimeout: time.Minute},
			Interval: 100 * time.Millisecond,
			OnLead: func(l *etcd.Leadership) {
				mu.Lock()
				leads = append(leads, lead{id, el()})
				mu.Unlock()
				fmt.Fprintf(w, "t=%-6s %s leads (fencing token %d)\n", el(), id, l.Rev)
			}}
		go func() { _ = e.Run(ectx) }()
		return ecancel, cli, nil
	}
	stopHead, headCli, err := startExecutor("headnode")
	if err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // the headnode's executor wins the first election
	stopOther, otherCli, err := startExecutor("cn-other")
	if err != nil {
		return err
	}
	defer func() { stopOther(); otherCli.Close() }()

	var headDown, headUp time.Duration
	headAlive := true
	last := ""
	for {
		if fleet.HeadnodeDown() && headAlive {
			// The headnode's power goes: its executor dies mid-flight. Its
			// client is closed without revoking the lease, which expires.
			headAlive, headDown = false, el()
			headCli.Close()
			stopHead()
			fmt.Fprintf(w, "t=%-6s headnode down: its executor died with it\n", headDown)
		}
		if !headAlive && headUp == 0 && !fleet.HeadnodeDown() {
			headUp = el()
			fmt.Fprintf(w, "t=%-6s headnode up again\n", headUp)
		}
		v, err := store.GetView(ctx, p.UUID)
		if err != nil {
			return err
		}
		line := v.Summary().Line(30)
		if line != last {
			fmt.Fprintf(w, "t=%-6s %s\n", el(), line)
			last = line
		}
		if !v.Unfinished() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var takeover time.Duration
	for _, l := range leads {
		if l.who == "cn-other" && l.at >= headDown {
			takeover = l.at
			break
		}
	}
	fmt.Fprintf(w, "\nresult: %s in %s; %d job(s) refused for a stale fencing token\n", stateOf(ctx, store, p.UUID), el(), fleet.StaleActions())
	if takeover > 0 {
		fmt.Fprintf(w, "gap without an executor: %s (cn-other took over %s after the headnode died; lease TTL %ds)\n",
			takeover-headDown, takeover-headDown, o.ttl)
	}
	if headUp > 0 {
		fmt.Fprintf(w, "a single executor on the headnode: gone for %s (the headnode's reboot), plus its own restart\n", headUp-headDown)
	}
	for s, n := range fleet.JobsCreated() {
		if n != 1 {
			return fmt.Errorf("server %s got %d jobs", s, n)
		}
	}
	return nil
}

func stateOf(ctx context.Context, s *etcd.Store, uuid string) plan.State {
	p, err := s.Get(ctx, uuid)
	if err != nil {
		return "unknown"
	}
	return p.State
}
