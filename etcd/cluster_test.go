package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// member is one etcd member process of a test cluster.
type member struct {
	name         string
	dir          string
	client, peer int
	cmd          *exec.Cmd
	out          *lockedBuffer
	exited       chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (m *member) endpoint() string { return fmt.Sprintf("127.0.0.1:%d", m.client) }

// cluster is three etcd member processes on loopback.
type cluster struct {
	t       *testing.T
	bin     string
	members []*member
}

func (c *cluster) initial() string {
	var parts []string
	for _, m := range c.members {
		parts = append(parts, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, m.peer))
	}
	return strings.Join(parts, ",")
}

func (c *cluster) start(m *member) {
	c.t.Helper()
	cu := fmt.Sprintf("http://127.0.0.1:%d", m.client)
	pu := fmt.Sprintf("http://127.0.0.1:%d", m.peer)
	m.cmd = exec.Command(c.bin, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", c.initial(), "--initial-cluster-token", "rebootkit-test", "--initial-cluster-state", "new",
		"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error")
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(m.cmd, m.exited)
}

func (c *cluster) kill(m *member) {
	_ = m.cmd.Process.Kill()
	<-m.exited
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.endpoint())
	}
	return out
}

// leader returns the member that leads the cluster now (nil if none
// answers).
func (c *cluster) leader(ctx context.Context, cli *clientv3.Client) *member {
	for _, m := range c.members {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(cctx, m.endpoint())
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}

// proxy forwards TCP connections to a target; cut, it keeps them open
// and lets no byte through either way until the cut heals (a partition
// that drops the client's packets).
type proxy struct {
	l      net.Listener
	target string
	cut    atomic.Bool
	closed atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			// Cut: the bytes go nowhere until the cut heals (what TCP
			// makes of packets dropped: nothing arrives, nothing is lost).
			for n > 0 && p.cut.Load() && !p.closed.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.Close()
		up.Close()
	}
	go pipe(up, c)
	pipe(c, up)
}

func (p *proxy) close() {
	p.closed.Store(true)
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// gate pauses an executor: armed, the next action it asks of the fleet
// (after the transaction that decided it) blocks until released, its
// network cut meanwhile: a process paused between its write and its
// actions, past its lease.
type gate struct {
	plan.Fleet
	vf      plan.ViewFleet
	sf      ShardFencer
	armed   atomic.Bool
	mu      sync.Mutex
	paused  chan struct{} // closed when a call blocked
	release chan struct{}
	// late records what the blocked call returned once released.
	late error
}

func (g *gate) block() {
	if !g.armed.CompareAndSwap(true, false) {
		return
	}
	g.mu.Lock()
	paused, release := g.paused, g.release
	g.mu.Unlock()
	close(paused)
	<-release
}

func (g *gate) arm() (paused, release chan struct{}) {
	g.mu.Lock()
	g.paused, g.release = make(chan struct{}), make(chan struct{})
	paused, release = g.paused, g.release
	g.mu.Unlock()
	g.armed.Store(true)
	return paused, release
}

func (g *gate) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	return g.vf.ObserveView(ctx, v)
}

func (g *gate) CreateJob(ctx context.Context, a plan.Action) error {
	if g.armed.Load() {
		g.block()
		err := g.Fleet.CreateJob(ctx, a)
		g.mu.Lock()
		g.late = err
		g.mu.Unlock()
		return err
	}
	return g.Fleet.CreateJob(ctx, a)
}

func (g *gate) FreezeShardFenced(ctx context.Context, token int64) error {
	return g.sf.FreezeShardFenced(ctx, token)
}

func (g *gate) UnfreezeShardFenced(ctx context.Context, token int64) error {
	return g.sf.UnfreezeShardFenced(ctx, token)
}

// TestEtcdCluster: a plan runs under two executors on a three-member etcd
// cluster (processes built by scripts/build-etcd.sh) while etcd members
// are killed and restarted (the etcd leader included), the history is
// compacted and defragmented, the leading executor's client is cut off by
// a proxy that drops its traffic, and the leading executor is paused
// between its write and its job past its lease; operators stop and run
// the plan meanwhile. Checked against the fleet's ground truth: servers
// offline never exceed the concurrency, one job per server, the
// operators' last command wins, no action of a deposed leader lands (the
// paused leader's late job is refused, and the fencing tokens of the
// actions the fleet took never go down), and the plan completes once the
// faults stop. It logs the executors' failover times.
func TestEtcdCluster(t *testing.T) {
	bin := os.Getenv("REBOOTKIT_ETCD_BIN")
	if bin == "" {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("REBOOTKIT_ETCD_BIN unset although CI builds etcd (scripts/build-etcd.sh)")
		}
		t.Skip("ETCD CLUSTER TEST SKIPPED: set REBOOTKIT_ETCD_BIN=$(scripts/build-etcd.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := &cluster{t: t, bin: bin}
	for i := 0; i < 3; i++ {
		c.members = append(c.members, &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(t.TempDir(), "data"),
			client: freePort(t), peer: freePort(t), out: &lockedBuffer{}})
	}
	for _, m := range c.members {
		c.start(m)
	}
	defer func() {
		for _, m := range c.members {
			c.kill(m)
			if t.Failed() {
				t.Logf("etcd %s output:\n%s", m.name, m.out.String())
			}
		}
	}()
	dial := func(eps []string) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second,
			DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	admin := dial(c.endpoints())
	const pre = "/cluster/"
	// retry runs f with a deadline per try until it succeeds.
	retry := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		for {
			cctx, cc := context.WithTimeout(ctx, 2*time.Second)
			err := f(cctx)
			cc()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	retry("cluster up", func(ctx context.Context) error { _, err := admin.Put(ctx, pre+"up", "1"); return err })

	const n, conc = 90, 3
	var fs []fake.FleetServer
	for i := 0; i < n; i++ {
		fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("s%02d", i), Hostname: fmt.Sprintf("cn%02d", i), Platform: "1", Core: i == 0,
			Queue: 50 * time.Millisecond, Drain: 100 * time.Millisecond, Shutdown: 50 * time.Millisecond, Boot: 1500 * time.Millisecond, Services: 200 * time.Millisecond})
	}
	world := fake.NewFleet(time.Now, "s07", fs...)
	// Ground truth of the fleet's actions: the tokens it took, in order.
	var tokMu sync.Mutex
	var taken []int64
	auth := Candidate{Client: dial(c.endpoints()), Prefix: pre}
	world.SetFenceCheck(func(token int64) error {
		cctx, cc := context.WithTimeout(ctx, 2*time.Second)
		defer cc()
		err := auth.CheckLeader(cctx, token)
		if err == nil {
			tokMu.Lock()
			taken = append(taken, token)
			tokMu.Unlock()
		}
		return err
	})
	p, _, err := plan.Create(world.Servers(), plan.CreateOptions{UUID: "cluster", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(conc), FailureBudget: plan.Count(n), CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p, _ = plan.Run(p)
	operator := NewStore(dial(c.endpoints()), pre)
	retry("create", func(ctx context.Context) error {
		err := operator.Create(ctx, p)
		if errors.Is(err, plan.ErrExists) {
			return nil
		}
		return err
	})

	// Two executors, each with its own client through proxies it can be
	// cut off by.
	type leadEvent struct {
		id  int
		rev int64
		at  time.Time
	}
	var leadMu sync.Mutex
	var leads []leadEvent
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	defer func() {
		if t.Failed() {
			t.Logf("executors' log:\n%s", logs.String())
			cctx, cc := context.WithTimeout(context.Background(), 2*time.Second)
			defer cc()
			if cur, err := operator.Get(cctx, "cluster"); err == nil {
				t.Logf("the plan:\n%s", plan.Table(cur))
			}
		}
	}()
	proxies := make([][]*proxy, 2)
	gates := make([]*gate, 2)
	for i := 0; i < 2; i++ {
		var eps []string
		for _, m := range c.members {
			px := newProxy(t, m.endpoint())
			proxies[i] = append(proxies[i], px)
			eps = append(eps, px.addr())
		}
		gates[i] = &gate{Fleet: world, vf: world, sf: world}
		id := i
		ex := &Executor{Candidate: Candidate{Client: dial(eps), Prefix: pre, ID: fmt.Sprintf("x%d", i), TTL: 2}, Fleet: gates[i], Logger: logger,
			Config: plan.Config{DrainTimeout: time.Minute, JobTimeout: time.Minute, ServicesTimeout: time.Minute}, Interval: 100 * time.Millisecond,
			OnLead: func(l *Leadership) {
				leadMu.Lock()
				leads = append(leads, leadEvent{id: id, rev: l.Rev, at: time.Now()})
				leadMu.Unlock()
			}}
		go func() { _ = ex.Run(ctx) }()
	}
	cutOff := func(i int, cut bool) {
		for _, px := range proxies[i] {
			px.cut.Store(cut)
		}
	}
	leader := func() (int, int64, int) {
		leadMu.Lock()
		defer leadMu.Unlock()
		if len(leads) == 0 {
			return -1, 0, 0
		}
		e := leads[len(leads)-1]
		return e.id, e.rev, len(leads)
	}
	// waitNewLeader waits until an executor other than the one at count
	// leads, and returns when.
	waitNewLeader := func(count int) time.Time {
		t.Helper()
		for {
			leadMu.Lock()
			if len(leads) > count {
				at := leads[len(leads)-1].at
				leadMu.Unlock()
				return at
			}
			leadMu.Unlock()
			if ctx.Err() != nil {
				t.Fatal("no executor took over")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Invariants checked all along: the plan's state agrees with the
	// operators' last command.
	var cmdMu sync.Mutex
	lastCmd := "run"
	check := func() {
		t.Helper()
		cctx, cc := context.WithTimeout(ctx, 2*time.Second)
		defer cc()
		cmdMu.Lock()
		defer cmdMu.Unlock()
		cur, err := operator.Get(cctx, "cluster")
		if err != nil {
			return // etcd unreachable for the moment
		}
		ok := map[string][]plan.State{"stop": {plan.StateStopped, plan.StateComplete, plan.StateFailed},
			"run": {plan.StateRunning, plan.StateComplete, plan.StateFailed}}[lastCmd]
		if !slices.Contains(ok, cur.State) {
			t.Errorf("the operators' last command was %s, the plan is %s", lastCmd, cur.State)
		}
	}
	command := func(name string) {
		t.Helper()
		f := map[string]func(plan.Plan) (plan.Plan, error){"stop": plan.Stop, "run": plan.Run}[name]
		cmdMu.Lock()
		defer cmdMu.Unlock()
		retry("operator "+name, func(ctx context.Context) error {
			_, err := plan.Command(ctx, operator, "cluster", f)
			if errors.Is(err, plan.ErrState) {
				return nil // finished already
			}
			return err
		})
		lastCmd = name
	}
	progress := func() int {
		var cur plan.Plan
		retry("progress", func(ctx context.Context) error {
			var err error
			cur, err = operator.Get(ctx, "cluster")
			return err
		})
		return plan.Summarize(cur, time.Now()).Done
	}
	waitDone := func(k int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for progress() < k {
			check()
			if time.Now().After(deadline) {
				t.Fatalf("the plan stalled before %d reboots", k)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var failovers []time.Duration

	// 1. The etcd leader is killed and restarted.
	waitDone(2)
	first := time.Now()
	var m *member
	retry("find the etcd leader", func(ctx context.Context) error {
		if m = c.leader(ctx, admin); m == nil {
			return errors.New("no member leads")
		}
		return nil
	})
	killed := time.Now()
	c.kill(m)
	retry("write after the etcd leader's death", func(ctx context.Context) error { _, err := admin.Put(ctx, pre+"probe", "1"); return err })
	t.Logf("etcd leader %s killed: writes again after %v", m.name, time.Since(killed).Round(time.Millisecond))
	time.Sleep(time.Second)
	c.start(m)

	// 2. The operators stop the plan, and run it again.
	command("stop")
	time.Sleep(500 * time.Millisecond)
	check()
	command("run")

	// 3. Compaction and defragmentation of every member.
	waitDone(progress() + 2)
	retry("compact", func(ctx context.Context) error {
		r, err := admin.Get(ctx, pre+"probe")
		if err != nil {
			return err
		}
		_, err = admin.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical())
		if err != nil && !strings.Contains(err.Error(), "compacted") {
			return err
		}
		return nil
	})
	for _, m := range c.members {
		retry("defragment "+m.name, func(ctx context.Context) error { _, err := admin.Defragment(ctx, m.endpoint()); return err })
	}

	// 4. The leading executor's client is cut off, twice; the other takes
	// over.
	for k := 0; k < 2; k++ {
		waitDone(progress() + 1)
		id, _, count := leader()
		cutAt := time.Now()
		cutOff(id, true)
		at := waitNewLeader(count)
		failovers = append(failovers, at.Sub(cutAt))
		t.Logf("executor x%d cut off: x%d leads after %v", id, 1-id, at.Sub(cutAt).Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
		cutOff(id, false)
	}

	// 5. A follower, then the leader, of etcd killed and restarted while
	// the plan runs.
	for k := 0; k < 2; k++ {
		waitDone(progress() + 1)
		l := c.leader(ctx, admin)
		victim := c.members[0]
		for _, m := range c.members {
			if (k == 0) != (m == l) {
				victim = m
				break
			}
		}
		c.kill(victim)
		time.Sleep(1500 * time.Millisecond)
		c.start(victim)
		check()
	}

	// 6. The leading executor pauses between its write and its job, past
	// its lease (its network cut meanwhile); the other takes over; the
	// late job must be refused. Twice.
	for k := 0; k < 2; k++ {
		waitDone(progress() + 1)
		id, _, count := leader()
		paused, release := gates[id].arm()
		select {
		case <-paused:
		case <-time.After(20 * time.Second):
			t.Fatal("the leader asked for no job")
		}
		pausedAt := time.Now()
		cutOff(id, true)
		at := waitNewLeader(count)
		failovers = append(failovers, at.Sub(pausedAt))
		t.Logf("executor x%d paused: x%d leads after %v", id, 1-id, at.Sub(pausedAt).Round(time.Millisecond))
		waitDone(progress() + 1) // the new leader acts
		cutOff(id, false)
		close(release)
		for {
			gates[id].mu.Lock()
			late := gates[id].late
			gates[id].mu.Unlock()
			if late != nil {
				if !errors.Is(late, fake.ErrStaleFence) {
					t.Errorf("the paused leader's late job: %v", late)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the paused leader's late job did not come back")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	faults := time.Since(first)

	// The faults stop: the plan completes.
	command("run")
	for {
		var cur plan.Plan
		retry("get", func(ctx context.Context) error {
			var err error
			cur, err = operator.Get(ctx, "cluster")
			return err
		})
		if !cur.Unfinished() {
			if cur.State != plan.StateComplete {
				t.Fatalf("the plan ended %s:\n%s", cur.State, plan.Table(cur))
			}
			break
		}
		check()
		if ctx.Err() != nil {
			t.Fatalf("the plan did not finish once the faults stopped:\n%s", plan.Table(cur))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for s, k := range world.JobsCreated() {
		if k != 1 {
			t.Errorf("server %s got %d jobs", s, k)
		}
	}
	if len(world.JobsCreated()) != n {
		t.Errorf("%d servers got a job, want %d", len(world.JobsCreated()), n)
	}
	for _, st := range world.Starts() {
		if len(st.Offline) >= conc {
			t.Errorf("job for %s started with %v offline, concurrency %d", st.Server, st.Offline, conc)
		}
	}
	tokMu.Lock()
	for i := 1; i < len(taken); i++ {
		if taken[i] < taken[i-1] {
			t.Errorf("the fleet took an action with fencing token %d after one with %d", taken[i], taken[i-1])
		}
	}
	tokMu.Unlock()
	if world.StaleActions() < 2 {
		t.Errorf("%d late actions refused, want the paused leaders' two at least", world.StaleActions())
	}
	slices.Sort(failovers)
	t.Logf("faults over %v; executor failovers (%d): median %v, worst %v; %d leaderships", faults.Round(time.Millisecond), len(failovers),
		failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond), len(leads))
}
