// Command rolling-reboot runs a rolling reboot plan over a simulated
// datacenter: 3 core servers (the headnode among them) and 60 others by
// default, reboot times drawn from a heavy-tailed (log-normal) distribution,
// and two servers whose reboot is made to fail on purpose (-failures), so
// that the plan ends "failed" and shows how failures are reported; -failures
// 0 ends "complete". Core servers go first, one at a time, the headnode
// first (the executor dies with it and resumes from the plan store); then
// the rest in a sliding window of -concurrency servers. It runs on a
// simulated clock: the first `go run` compiles it and its dependencies
// first (about 45 s on a small machine), after that it finishes in about a
// second.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

type options struct {
	servers, core, failures int
	concurrency             string
	budget                  int
	seed                    uint64
	dir                     string
	quiet                   bool
	outage                  int
	store                   string
	// Issue 30's policies.
	racks, rackLimit int
	ramp, window     string
	zone             string
}

func main() {
	var o options
	flag.IntVar(&o.servers, "servers", 60, "non-core servers")
	flag.IntVar(&o.core, "core", 3, "core servers, the headnode included")
	flag.StringVar(&o.concurrency, "concurrency", "5", "servers offline at once: a count, or a percentage like 10%")
	flag.IntVar(&o.failures, "failures", 2, "servers whose reboot fails")
	flag.IntVar(&o.budget, "budget", 3, "failed reboots tolerated before the plan stops")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed of the simulated fleet")
	flag.StringVar(&o.dir, "dir", "", "directory for the plan store (default: a temporary one)")
	flag.BoolVar(&o.quiet, "quiet", false, "print only the summary")
	flag.StringVar(&o.store, "store", "bolt", "plan store: bolt (one bbolt file, one record per reboot) or file (one JSON document); etcd lives in its own module (see the message)")
	flag.IntVar(&o.outage, "outage", 0, "servers that go down for reasons of their own from t=40m to t=70m (the plan waits and says why)")
	flag.IntVar(&o.racks, "racks", 6, "racks the non-core servers sit in, in hostname order (label rack)")
	flag.IntVar(&o.rackLimit, "rack-limit", 0, "at most this many servers offline per rack (0: no limit)")
	flag.StringVar(&o.ramp, "ramp", "", `canary ramp, e.g. "1,5,20%"`)
	flag.StringVar(&o.window, "window", "", `a weekly maintenance window, e.g. "daily 00:30-02:00" (the simulation starts on Thursday 2026-01-01 at 00:00 UTC)`)
	flag.StringVar(&o.zone, "time-zone", "UTC", "the window's time zone")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "rolling-reboot:", err)
		os.Exit(1)
	}
}

// Fleet builds the simulated datacenter.
func fleet(o options) ([]fake.FleetServer, string) {
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	logn := func(median time.Duration, sigma float64) time.Duration {
		return time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64())).Round(time.Second)
	}
	var servers []fake.FleetServer
	n := o.core + o.servers
	failing := map[int]bool{}
	for len(failing) < min(o.failures, o.servers) {
		failing[o.core+rng.IntN(o.servers)] = true
	}
	for i := 0; i < n; i++ {
		s := fake.FleetServer{
			UUID:     fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Platform: "20150801T000000Z",
			Queue:    time.Duration(5+rng.IntN(25)) * time.Second,
			Drain:    logn(30*time.Second, 1.0),
			Shutdown: 20 * time.Second,
			Boot:     logn(4*time.Minute, 0.6),
			Services: logn(time.Minute, 0.8),
			FailJob:  failing[i] && i%2 == 0,
			NeverUp:  failing[i] && i%2 == 1,
		}
		switch {
		case i == 0 && o.core > 0: // -core 0: no core servers, no headnode
			s.Hostname, s.Headnode, s.Core = "headnode", true, true
			s.Services = logn(6*time.Minute, 0.3)
		case i < o.core:
			s.Hostname, s.Core = fmt.Sprintf("core-%02d", i), true
			s.Services = logn(4*time.Minute, 0.3)
		default:
			s.Hostname = fmt.Sprintf("cn-%03d", i-o.core)
			s.Labels = map[string]string{"rack": fmt.Sprintf("r%02d", (i-o.core)*max(o.racks, 1)/o.servers)}
		}
		servers = append(servers, s)
	}
	if o.core == 0 {
		return servers, "" // no core server: no database shard to freeze
	}
	return servers, servers[min(1, o.core-1)].UUID // the shard primary runs on a core server
}

// parseLimit parses -concurrency as rebootctl does: a count >= 1 or a
// percentage from 1% to 100%.
func parseLimit(s string) (plan.Limit, error) {
	p, pct := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || pct && n > 100 {
		return plan.Limit{}, fmt.Errorf("want a count >= 1 or a percentage from 1%% to 100%%")
	}
	if pct {
		return plan.Percent(n), nil
	}
	return plan.Count(n), nil
}

// check validates the options that the flags cannot.
func (o options) check() error {
	switch {
	case o.core < 0:
		return fmt.Errorf("-core %d: want 0 (no core servers, no headnode) or more", o.core)
	case o.servers < 0:
		return fmt.Errorf("-servers %d: want 0 or more", o.servers)
	case o.core+o.servers == 0:
		return fmt.Errorf("-core 0 -servers 0: no server to reboot")
	case o.failures < 0 || o.failures > o.servers:
		return fmt.Errorf("-failures %d: want 0 to -servers (%d)", o.failures, o.servers)
	case o.budget < 0:
		return fmt.Errorf("-budget %d: want 0 or more", o.budget)
	}
	return nil
}

func run(w io.Writer, o options) error {
	ctx := context.Background()
	conc, err := parseLimit(o.concurrency)
	if err != nil {
		return fmt.Errorf("-concurrency %q: %w", o.concurrency, err)
	}
	if err := o.check(); err != nil {
		return err
	}
	if o.failures > 0 {
		fmt.Fprintf(w, "this simulation makes %d reboot(s) fail on purpose (-failures %d; -failures 0 for none): expect \"result: failed\"\n", o.failures, o.failures)
	}
	dir, temporary := o.dir, ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rolling-reboot-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		temporary = " (temporary: removed when the example ends; -dir keeps it)"
	}
	clk := fake.NewClock(time.Time{})
	servers, primary := fleet(o)
	dc := fake.NewFleet(clk.Now, primary, servers...)
	var store plan.Store
	storeAt := filepath.Join(dir, "plans.db")
	switch o.store {
	case "bolt", "":
		bs, err := plan.OpenBolt(storeAt)
		if err != nil {
			return err
		}
		defer bs.Close()
		store = bs
	case "file":
		store, storeAt = plan.FileStore{Dir: dir}, filepath.Join(dir, "<uuid>.json")
	default:
		if o.store == "etcd" {
			return fmt.Errorf("-store etcd: the etcd store and its executors live in their own module, so that this one does not depend on etcd: run `cd etcd && go run ./examples/rolling-reboot` (an embedded etcd, two executors, the headnode's dies with it)")
		}
		return fmt.Errorf("-store %q: bolt or file", o.store)
	}

	co := plan.CreateOptions{
		UUID: "5a1d6c0e-0000-4000-8000-000000000001", Target: "20151001T000000Z",
		Select: plan.SelectAll, Concurrency: conc, FailureBudget: plan.Count(o.budget),
	}
	if o.rackLimit > 0 {
		co.DomainLimits = []plan.DomainLimit{{Label: "rack", Max: o.rackLimit}}
	}
	if o.ramp != "" {
		if co.Ramp, err = plan.ParseRamp(o.ramp); err != nil {
			return fmt.Errorf("-ramp: %w", err)
		}
	}
	if o.window != "" {
		co.Windows = &plan.Windows{TimeZone: o.zone, Weekly: []string{o.window}}
	}
	p, warns, err := plan.Create(dc.Servers(), co)
	for _, wn := range warns {
		fmt.Fprintln(w, "warning:", wn)
	}
	if err != nil {
		return err
	}
	if p, err = plan.Run(p); err != nil {
		return err
	}
	if err := store.Create(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(w, "plan %s: %d servers (%d core), concurrency %d, failure budget %d, plan store %s%s\n",
		p.UUID, len(p.Reboots), o.core, p.Concurrency, p.FailureBudget, storeAt, temporary)

	exec := &plan.Executor{Fleet: dc, Store: store, Now: clk.Now}
	tick := 10 * time.Second
	var held time.Duration // time the windows held the plan
	lastLine, restarts := time.Duration(-1), 0
	headDown := false
	for i := 0; i < 100000; i++ {
		q, err := exec.Pass(ctx, p.UUID)
		switch {
		case err == nil:
			if headDown {
				// The headnode is back: a new executor starts from the
				// plan file, as sdcadm-agent does at boot.
				exec = &plan.Executor{Fleet: dc, Store: store, Now: clk.Now}
				headDown = false
				restarts++
				if !o.quiet {
					fmt.Fprintf(w, "t=%-8s headnode back: executor restarted from the plan store\n", clk.Now().Sub(fake.Epoch))
				}
			}
		case errors.Is(err, fake.ErrUnavailable):
			if !headDown && !o.quiet {
				fmt.Fprintf(w, "t=%-8s headnode rebooting: executor down\n", clk.Now().Sub(fake.Epoch))
			}
			headDown = true
		default:
			return err
		}
		el := clk.Now().Sub(fake.Epoch)
		if o.outage > 0 && (el == 40*time.Minute || el == 70*time.Minute) {
			// An outage the plan does not control: the last servers of the
			// plan go down, and come back half an hour later.
			down := el == 40*time.Minute
			for k := 0; k < o.outage && k < len(servers); k++ {
				dc.SetDown(servers[len(servers)-1-k].UUID, down)
			}
			if !o.quiet {
				fmt.Fprintf(w, "t=%-8s outage: %d server(s) down=%v for reasons of their own\n", el, o.outage, down)
			}
		}
		if !o.quiet && err == nil && (el/(5*time.Minute) != lastLine || !q.Unfinished()) {
			lastLine = el / (5 * time.Minute)
			fmt.Fprintf(w, "t=%-8s %s\n", el, q.SummaryAt(clk.Now()).Line(40))
		}
		if err == nil && !q.Unfinished() {
			break
		}
		if err == nil && strings.Contains(q.Waiting, "maintenance window") {
			held += tick
		}
		clk.Advance(tick)
	}
	final, err := store.Get(ctx, p.UUID)
	if err != nil {
		return err
	}
	makespan := clk.Now().Sub(fake.Epoch)
	if !o.quiet {
		fmt.Fprint(w, "\n"+plan.Table(final))
	}
	jobs := dc.JobsCreated()
	twice := 0
	for _, n := range jobs {
		if n > 1 {
			twice++
		}
	}
	lb, batches := bounds(servers, final, o.rackLimit)
	expected := ""
	if o.failures > 0 && final.State == plan.StateFailed {
		expected = " (as expected: reboots were made to fail)"
	}
	fmt.Fprintf(w, "\nresult: %s%s in %s (simulated); %d executor restart(s); %d server(s) with more than one job\n",
		final.State, expected, makespan, restarts, twice)
	fmt.Fprintf(w, "makespan: sliding window %s, fixed batches %s (%.2fx), lower bound %s (sliding window %.2fx)\n",
		makespan.Round(time.Second), batches.Round(time.Second), float64(batches)/float64(makespan),
		lb.Round(time.Second), float64(makespan)/float64(lb))
	policy(w, o, dc, servers, final, held)
	return nil
}

// policy prints the figures of the plan's windows, ramp and rack limit,
// checked against the fleet's ground truth (fake.Fleet.Starts).
func policy(w io.Writer, o options, dc *fake.Fleet, servers []fake.FleetServer, p plan.Plan, held time.Duration) {
	rack := map[string]string{}
	for _, s := range servers {
		rack[s.UUID] = s.Labels["rack"]
	}
	starts := dc.Starts()
	if o.rackLimit > 0 {
		most := 0
		for _, st := range starts {
			n := 0
			for _, id := range st.Offline {
				if r := rack[st.Server]; r != "" && rack[id] == r {
					n++
				}
			}
			most = max(most, n+1)
		}
		fmt.Fprintf(w, "rack limit %d (%d racks, interleaved in the plan's order): at most %d server(s) of one rack offline at a job start (ground truth)\n",
			o.rackLimit, o.racks, most)
	}
	if len(p.Ramp) > 0 {
		fmt.Fprintf(w, "canary ramp %v then %d:", p.Ramp, p.Concurrency)
		for k, st := range starts {
			if k < 12 {
				fmt.Fprintf(w, " %d", len(st.Offline)+1)
			}
		}
		fmt.Fprintln(w, " ... offline as the first jobs started")
	}
	if !p.Windows.Empty() {
		outside := 0
		for _, st := range starts {
			if open, _, _ := p.Windows.Open(st.At); !open {
				outside++
			}
		}
		first := "-"
		if len(starts) > 0 {
			first = starts[0].At.Sub(fake.Epoch).String()
		}
		fmt.Fprintf(w, "maintenance window %q (%s): first job at t=%s, %s held outside the windows, %d job(s) started outside\n",
			o.window, o.zone, first, held, outside)
	}
}

// bounds computes, for the servers the plan rebooted, a lower bound on the
// makespan (core reboots in series, then the rest spread perfectly over the
// concurrency, but never shorter than the longest reboot) and the makespan
// of the original tool's fixed batches with a barrier.
//
// With a rack limit, the bound also never drops below any rack's reboots
// spread over its limit.
func bounds(servers []fake.FleetServer, p plan.Plan, rackLimit int) (lower, batches time.Duration) {
	byID := map[string]fake.FleetServer{}
	for _, s := range servers {
		byID[s.UUID] = s
	}
	var core time.Duration
	var rest []time.Duration
	var sum, longest time.Duration
	racks := map[string]time.Duration{}
	for _, r := range p.Reboots {
		if r.Step == plan.StepPending {
			continue
		}
		d := byID[r.ServerUUID].RebootTime()
		if r.Core {
			core += d
			continue
		}
		rest = append(rest, d)
		sum += d
		longest = max(longest, d)
		racks[r.Labels["rack"]] += d
	}
	c := max(p.Concurrency, 1)
	lower = core + max(sum/time.Duration(c), longest)
	if rackLimit > 0 {
		for _, d := range racks {
			lower = max(lower, core+d/time.Duration(rackLimit))
		}
	}
	batches = core
	for i := 0; i < len(rest); i += c {
		b := rest[i:min(i+c, len(rest))]
		sort.Slice(b, func(x, y int) bool { return b[x] > b[y] })
		batches += b[0]
	}
	return lower, batches
}
