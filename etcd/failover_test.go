package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/plan"
)

// holdFleet passes actions to the fleet, or, while hold is set, keeps
// them: an executor paused between the transaction that saved the plan
// and the jobs it asks for.
type holdFleet struct {
	*fake.Fleet
	hold bool
	held []plan.Action
}

func (h *holdFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if h.hold {
		h.held = append(h.held, a)
		return nil
	}
	return h.Fleet.CreateJob(ctx, a)
}

func (h *holdFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if h.hold {
		h.held = append(h.held, a)
		return nil
	}
	return h.Fleet.CancelJob(ctx, a)
}

func (h *holdFleet) FreezeShard(ctx context.Context) error {
	return h.FreezeShardFenced(ctx, 0)
}

func (h *holdFleet) UnfreezeShard(ctx context.Context) error {
	return h.UnfreezeShardFenced(ctx, 0)
}

// FreezeShardFenced and UnfreezeShardFenced make holdFleet a ShardFencer
// (token 0: not fenced).
func (h *holdFleet) FreezeShardFenced(ctx context.Context, token int64) error {
	if h.hold {
		h.held = append(h.held, plan.Action{Kind: plan.ActionFreeze, Fence: token})
		return nil
	}
	return h.shard(ctx, plan.Action{Kind: plan.ActionFreeze, Fence: token})
}

func (h *holdFleet) UnfreezeShardFenced(ctx context.Context, token int64) error {
	if h.hold {
		h.held = append(h.held, plan.Action{Kind: plan.ActionUnfreeze, Fence: token})
		return nil
	}
	return h.shard(ctx, plan.Action{Kind: plan.ActionUnfreeze, Fence: token})
}

func (h *holdFleet) shard(ctx context.Context, a plan.Action) error {
	switch {
	case a.Kind == plan.ActionFreeze && a.Fence != 0:
		return h.Fleet.FreezeShardFenced(ctx, a.Fence)
	case a.Kind == plan.ActionFreeze:
		return h.Fleet.FreezeShard(ctx)
	case a.Fence != 0:
		return h.Fleet.UnfreezeShardFenced(ctx, a.Fence)
	default:
		return h.Fleet.UnfreezeShard(ctx)
	}
}

// deliver sends the held actions, late, and returns how many the fleet
// took.
func (h *holdFleet) deliver(ctx context.Context) int {
	took := 0
	for _, a := range h.held {
		var err error
		switch a.Kind {
		case plan.ActionCreateJob:
			err = h.Fleet.CreateJob(ctx, a)
		case plan.ActionCancelJob:
			err = h.Fleet.CancelJob(ctx, a)
		default:
			err = h.shard(ctx, a)
		}
		if err == nil {
			took++
		}
	}
	h.held, h.hold = nil, false
	return took
}

// executorSim is one executor of the failover test, stepped by the test.
type executorSim struct {
	cand    Candidate
	fleet   *holdFleet
	session *concurrency.Session
	lead    *Leadership
	paused  bool
	deposed bool // its lease was revoked while it believed it led
}

// TestFailover: three executors over one plan on a simulated fleet, on a
// real (embedded) etcd. At random points the leader is killed (its session
// ends), or paused (its lease expires while it believes it leads; it may
// be paused between the transaction that saved the plan and the jobs it
// asks for, which it then sends late), operators issue stop, run and
// cancel through plain compare-and-swap writes, servers go down and come
// back, and the clock moves. Checked after every step, against the
// fleet's ground truth:
//   - no server ever gets two jobs;
//   - no job started while concurrency or more other servers were offline;
//   - every write of a paused ex-leader is refused (the plan's revision
//     does not move while it passes), and the fleet refuses its late
//     actions (their fencing token is not the current leader's);
//   - the operators' last command wins.
//
// At the end the world behaves and the operators run the plan: whoever
// leads finishes it.
func TestFailover(t *testing.T) { failover(t, false) }

// TestFailoverShard is TestFailover with a database shard whose primary
// (drawn) is one of the servers: the executors freeze and unfreeze it,
// and a paused leader's late freeze or unfreeze must be refused like its
// jobs (issue 29).
func TestFailoverShard(t *testing.T) { failover(t, true) }

func failover(t *testing.T, shard bool) {
	cli := newClient(t)
	rapidcheck.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		pre := prefix(t) + fmt.Sprintf("%d/", time.Now().UnixNano())
		clk := fake.NewClock(time.Time{})
		n := rapid.IntRange(2, 7).Draw(rt, "servers")
		var fs []fake.FleetServer
		for i := 0; i < n; i++ {
			fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("u%02d", i), Hostname: fmt.Sprintf("cn%02d", i), Platform: "1",
				Core: i == 0, Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second,
				Boot: time.Duration(rapid.IntRange(30, 300).Draw(rt, "boot")) * time.Second, Services: 20 * time.Second})
		}
		primary := ""
		if shard {
			primary = rapid.SampledFrom(fs).Draw(rt, "primary").UUID
		}
		world := fake.NewFleet(clk.Now, primary, fs...)
		// The fleet refuses an action whose token is not the current
		// leader's (as one keeping its jobs in etcd would).
		auth := Candidate{Client: cli, Prefix: pre}
		world.SetFenceCheck(func(token int64) error { return auth.CheckLeader(ctx, token) })
		conc := rapid.IntRange(1, 3).Draw(rt, "concurrency")
		p, _, err := plan.Create(world.Servers(), plan.CreateOptions{UUID: "failover", Target: "2", Select: plan.SelectAll,
			Concurrency: plan.Count(conc), FailureBudget: plan.Count(n), CreatedAt: clk.Now()})
		if err != nil {
			rt.Fatal(err)
		}
		p, _ = plan.Run(p)
		operator := NewStore(cli, pre)
		if err := operator.Create(ctx, p); err != nil {
			rt.Fatal(err)
		}
		cfg := plan.Config{DrainTimeout: 5 * time.Minute, JobTimeout: 20 * time.Minute, ServicesTimeout: 30 * time.Minute}
		execs := make([]*executorSim, 3)
		for i := range execs {
			execs[i] = &executorSim{cand: Candidate{Client: cli, Prefix: pre, ID: fmt.Sprintf("exec-%d", i), TTL: 60}, fleet: &holdFleet{Fleet: world}}
		}
		defer func() {
			for _, e := range execs {
				if e.session != nil {
					e.session.Orphan()
					_, _ = cli.Revoke(ctx, e.session.Lease())
				}
			}
		}()
		revOf := func() int64 {
			resp, err := cli.Get(ctx, operator.headerKey("failover"))
			if err != nil || len(resp.Kvs) == 0 {
				rt.Fatalf("header: %v", err)
			}
			return resp.Kvs[0].ModRevision
		}
		lastCmd := ""
		command := func(name string) {
			f := map[string]func(plan.Plan) (plan.Plan, error){"stop": plan.Stop, "run": plan.Run, "cancel": plan.Cancel}[name]
			if _, err := plan.Command(ctx, operator, "failover", f); err == nil {
				lastCmd = name
			} else if !errors.Is(err, plan.ErrState) {
				rt.Fatalf("operator %s: %v", name, err)
			}
		}
		// step lets executor e act: campaign if nobody leads, or pass.
		step := func(e *executorSim) {
			if e.paused {
				return
			}
			if e.session != nil {
				select {
				case <-e.session.Done():
					e.session, e.lead = nil, nil
				default:
				}
			}
			if e.lead == nil {
				if _, _, ok, err := e.cand.Leader(ctx); err != nil || ok {
					return // someone leads (or etcd is unreachable): wait
				}
				if e.session == nil {
					s, err := e.cand.NewSession(ctx)
					if err != nil {
						rt.Fatal(err)
					}
					e.session = s
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				l, err := e.cand.Campaign(cctx, e.session)
				cancel()
				if err != nil {
					return
				}
				e.lead, e.deposed = l, false
			}
			before := revOf()
			err := e.lead.Pass(ctx, e.fleet, cfg, clk.Now, nil)
			if e.deposed {
				if after := revOf(); after != before {
					rt.Fatalf("%s wrote the plan (revision %d -> %d) after it lost its lease", e.cand.ID, before, after)
				}
			}
			if errors.Is(err, ErrNotLeader) {
				e.lead = nil
			} else if err != nil && !errors.Is(err, fake.ErrUnavailable) && !errors.Is(err, fake.ErrStaleFence) {
				rt.Fatalf("%s pass: %v", e.cand.ID, err)
			}
			if e.fleet.hold {
				// Paused right after its transaction: its lease expires
				// while it sleeps.
				e.paused, e.deposed = true, true
				_, _ = cli.Revoke(ctx, e.session.Lease())
			}
		}
		check := func() {
			for s, c := range world.JobsCreated() {
				if c > 1 {
					rt.Fatalf("server %s got %d jobs", s, c)
				}
			}
			for _, st := range world.Starts() {
				if len(st.Offline) >= conc {
					rt.Fatalf("job for %s started with %v offline, concurrency %d", st.Server, st.Offline, conc)
				}
			}
			cur, err := operator.Get(ctx, "failover")
			if err != nil {
				rt.Fatal(err)
			}
			ok := map[string][]plan.State{"": nil, "cancel": {plan.StateCanceled},
				"stop": {plan.StateStopped, plan.StateComplete, plan.StateFailed},
				"run":  {plan.StateRunning, plan.StateComplete, plan.StateFailed}}[lastCmd]
			if ok != nil && !slices.Contains(ok, cur.State) {
				rt.Fatalf("the operators' last command was %s, the plan is %s", lastCmd, cur.State)
			}
		}
		steps := rapid.IntRange(5, 60).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			e := execs[rapid.IntRange(0, 2).Draw(rt, "executor")]
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0: // killed: its session ends, the next leader takes over
				if e.session != nil && !e.paused {
					e.session.Close()
					e.session, e.lead = nil, nil
				}
			case 1: // paused; its lease expires
				if e.session != nil && !e.paused {
					e.paused, e.deposed = true, e.lead != nil
					_, _ = cli.Revoke(ctx, e.session.Lease())
				}
			case 2: // paused right after its next transaction, before the jobs
				if e.lead != nil && !e.paused {
					e.fleet.hold = true
					step(e)
				}
			case 3: // resumed: late actions, then it believes it still leads
				if e.paused {
					e.paused = false
					if took := e.fleet.deliver(ctx); took > 0 {
						rt.Fatalf("the fleet took %d late actions of %s, paused past its lease", took, e.cand.ID)
					}
					step(e)
				}
			case 4:
				command(rapid.SampledFrom([]string{"stop", "run", "run", "cancel"}).Draw(rt, "command"))
			case 5:
				world.SetDown(rapid.SampledFrom(fs).Draw(rt, "down").UUID, rapid.Bool().Draw(rt, "isDown"))
			case 6, 7:
				clk.Advance(time.Duration(rapid.IntRange(5, 120).Draw(rt, "dt")) * time.Second)
			default:
				step(e)
			}
			check()
		}
		// The world behaves: nobody is paused any more, servers are up, and
		// the operators run the plan unless they canceled it.
		for _, e := range execs {
			if e.paused {
				e.paused = false
				if took := e.fleet.deliver(ctx); took > 0 {
					rt.Fatalf("the fleet took %d late actions of %s, paused past its lease", took, e.cand.ID)
				}
			}
			e.fleet.hold = false
		}
		for _, s := range fs {
			world.SetDown(s.UUID, false)
		}
		if lastCmd != "cancel" {
			command("run")
		}
		for i := 0; i < 2000; i++ {
			for _, e := range execs {
				step(e)
			}
			check()
			cur, err := operator.Get(ctx, "failover")
			if err != nil {
				rt.Fatal(err)
			}
			if !cur.Unfinished() {
				return
			}
			clk.Advance(time.Minute)
		}
		cur, _ := operator.Get(ctx, "failover")
		rt.Fatalf("the plan did not finish once the world behaved (%s):\n%s", cur.Waiting, plan.Table(cur))
	})
}
