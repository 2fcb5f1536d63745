package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// bigRun is a running plan of n servers in etcd, led by one executor
// whose passes a test runs back to back (executor), its clock moving 30
// simulated seconds per pass.
type bigRun struct {
	store *Store // the operator's store (no guard)
	fleet *fake.Fleet
	clk   *fake.Clock
	l     *Leadership
	uuid  string
}

func newBigRun(tb testing.TB, n, conc int) *bigRun {
	tb.Helper()
	ctx := context.Background()
	cli := newClient(tb)
	pre := prefix(tb)
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		// Boot times spread over 3 minutes: every pass sees reboots end.
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 10 * time.Second, Drain: 30 * time.Second, Shutdown: 20 * time.Second, Boot: 3*time.Minute + time.Duration(i%180)*time.Second, Services: time.Minute}
	}
	fleet := fake.NewFleet(clk.Now, "", fs...)
	p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "big", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(conc), CreatedAt: clk.Now()})
	require.NoError(tb, err)
	p, _ = plan.Run(p)
	st := NewStore(cli, pre)
	require.NoError(tb, st.Create(ctx, p))
	cand := Candidate{Client: cli, Prefix: pre, ID: "exec", TTL: 60}
	s, err := cand.NewSession(ctx)
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	l, err := cand.Campaign(ctx, s)
	require.NoError(tb, err)
	return &bigRun{store: NewStore(newClient(tb), pre), fleet: fleet, clk: clk, l: l, uuid: "big"}
}

func (r *bigRun) pass(ctx context.Context) error {
	err := r.l.Pass(ctx, r.fleet, plan.Config{}, r.clk.Now, nil)
	r.clk.Advance(30 * time.Second)
	return err
}

// executor runs passes back to back until the returned function is
// called; that returns how many passes ran and their errors.
func (r *bigRun) executor(tb testing.TB) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		n    atomic.Int64
		errs error
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := r.pass(ctx); err != nil && ctx.Err() == nil {
				errs = errors.Join(errs, err)
			}
			n.Add(1)
		}
	}()
	// Let it write a few passes first.
	for deadline := time.Now().Add(time.Minute); n.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return func() (int, error) {
		cancel()
		wg.Wait()
		return int(n.Load()), errs
	}
}

// storedState reads the plan's header straight from etcd (not through
// the store under test).
func (r *bigRun) storedState(tb testing.TB) (plan.State, plan.Index) {
	resp, err := r.store.cli.Get(context.Background(), r.store.headerKey(r.uuid))
	require.NoError(tb, err)
	require.Len(tb, resp.Kvs, 1)
	var h header
	require.NoError(tb, json.Unmarshal(resp.Kvs[0].Value, &h))
	return h.Plan.State, h.Index
}

// TestStopLandsWhileExecutorRuns (issue 37, point 1): an operator's stop,
// run and cancel land on a large running plan whose executor writes a
// pass every few etcd round trips of the operator (the hook runs a pass
// before every third request of the operator's client: time measured in
// round trips, so the test does not depend on the machine's speed).
// plan.Command read the whole plan (a request per 100 pages) before its
// compare-and-swap, so every try lost to a pass (ErrConflict after 100
// tries); a header-only command is two.
func TestStopLandsWhileExecutorRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20,000-server plan")
	}
	r := newBigRun(t, 20_000, 1_000)
	ctx := context.Background()
	for i := 0; i < 12; i++ { // until reboots end every pass
		require.NoError(t, r.pass(ctx))
	}
	var (
		requests, passes int
		passErr          error
	)
	cli := hookClient(t, func(any) error {
		requests++
		if requests%3 == 0 {
			passErr = errors.Join(passErr, r.pass(ctx))
			passes++
		}
		return nil
	}, nil)
	r.store = NewStore(cli, r.store.prefix)
	for _, c := range []struct {
		f    func(plan.Plan) (plan.Plan, error)
		want plan.State
	}{{plan.Stop, plan.StateStopped}, {plan.Run, plan.StateRunning}, {plan.Cancel, plan.StateCanceled}} {
		before := requests
		_, err := plan.Command(ctx, r.store, r.uuid, c.f)
		require.NoError(t, err, "the command did not land in %d round trips", requests-before)
		state, _ := r.storedState(t)
		require.Equal(t, c.want, state)
		t.Logf("%s landed in %d round trips", c.want, requests-before)
	}
	require.NoError(t, passErr)
	require.Positive(t, passes)
	_, ix := r.storedState(t)
	// Nothing starts after the cancel.
	for i := 0; i < 3; i++ {
		require.NoError(t, r.pass(ctx))
	}
	_, after := r.storedState(t)
	require.Equal(t, ix.Started, after.Started, "a reboot started after the cancel landed")
}

// TestCreateIdempotentAfterLostAnswer (issue 37, point 4): a Create whose
// header transaction was applied but whose answer was lost is tried
// again by the operator and succeeds; a different plan of that UUID is
// still refused. The old Create answered the retry with ErrExists for its
// own plan.
func TestCreateIdempotentAfterLostAnswer(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	lose := true
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && lose {
			for _, op := range r.Success {
				if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), pre+"headers/") {
					lose = false
					return status.Error(codes.Unavailable, "connection lost after the request was applied")
				}
			}
		}
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(icpt)}})
	require.NoError(t, err)
	defer cli.Close()
	clk := fake.NewClock(time.Time{})
	p := runningPlan(t, "c", fleetOf(clk, "c", 3, "").Servers(), 1, clk.Now())
	s := NewStore(cli, pre)
	require.Error(t, s.Create(ctx, p), "the answer was lost")
	require.NoError(t, s.Create(ctx, p), "the retry of the same request")
	got, err := NewStore(newClient(t), pre).Get(ctx, "c")
	require.NoError(t, err)
	require.Len(t, got.Reboots, 3)
	other := runningPlan(t, "c", fleetOf(clk, "d", 3, "").Servers(), 1, clk.Now())
	require.ErrorIs(t, s.Create(ctx, other), plan.ErrExists)
	// After passes the request is still recognized.
	l, _ := lead(t, pre, "x", 60)
	require.NoError(t, l.Pass(ctx, fleetOf(clk, "c", 3, ""), cfg29, clk.Now, nil))
	require.NoError(t, s.Create(ctx, p))
}

// hugeErrorFleet reports every job as failed with an error text of 2 MiB.
type hugeErrorFleet struct{ *fake.Fleet }

func (f hugeErrorFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	obs, err := f.Fleet.ObserveView(ctx, v)
	for id, j := range obs.Jobs {
		if j.Exists {
			j.Failed, j.Error = true, strings.Repeat("disk on fire\n", 2<<20/13)
			obs.Jobs[id] = j
		}
	}
	return obs, err
}

// TestHugeErrorTextBounded (issue 37, point 6): a job's error text of 2
// MiB is kept bounded, so the page holding the reboot stays under etcd's
// request limit and the plan goes on. The old pass wrote it whole: etcd
// refused the request (too large) on every pass, and the plan was wedged.
func TestHugeErrorTextBounded(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	world := hugeErrorFleet{fleetOf(clk, "e", 3, "")}
	operator := NewStore(newClient(t), pre)
	p := runningPlan(t, "e", world.Servers(), 1, clk.Now())
	p.FailureBudget = 3
	require.NoError(t, operator.Create(ctx, p))
	l, _ := lead(t, pre, "x", 60)
	for i := 0; i < 6; i++ {
		require.NoError(t, l.Pass(ctx, world, cfg29, clk.Now, nil), "pass %d", i)
		clk.Advance(30 * time.Second)
	}
	got, err := operator.Get(ctx, "e")
	require.NoError(t, err)
	failed := 0
	for _, r := range got.Reboots {
		require.LessOrEqual(t, len(r.Error), plan.MaxErrorBytes)
		if r.Step == plan.StepFailed {
			failed++
			require.Contains(t, r.Error, "disk on fire")
			require.NotContains(t, r.Error, "\n", "a peer's control characters")
		}
	}
	require.Positive(t, failed)
}

// TestWorstRecordPageFits (issue 37, point 6): the record fields that come
// from outside are bounded (names, labels by Validate; error text by
// NextView), so that a page of PageSize records at every bound fits one
// transaction. The old Validate let a server have 64 labels of 253 + 253
// bytes: 32 such records make a page over a MiB, and with long names
// over etcd's request limit.
func TestWorstRecordPageFits(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := runningPlan(t, "w", fleetOf(clk, "w", PageSize, "").Servers(), 1, clk.Now())
	labels := map[string]string{}
	for i := 0; i < 64; i++ {
		labels[fmt.Sprintf("%03d%s", i, strings.Repeat("k", 250))] = strings.Repeat("v", 253)
	}
	big := p.Clone()
	big.Reboots[1].Labels = labels
	require.ErrorIs(t, big.Validate(), plan.ErrTooLarge, "64 labels of 506 bytes")
	long := p.Clone()
	long.Reboots[1].ServerHostname = strings.Repeat("h", 100_000)
	require.ErrorIs(t, long.Validate(), plan.ErrTooLarge, "a hostname of 100,000 bytes")

	at := clk.Now()
	worst := p.Clone()
	for i := range worst.Reboots {
		r := &worst.Reboots[i]
		name := func(c string) string { return fmt.Sprintf("%02d", i) + strings.Repeat(c, plan.MaxNameBytes-2) }
		r.ServerUUID, r.ServerHostname, r.BootPlatform, r.CurrentPlatform, r.JobUUID = name("u"), name("h"), name("b"), name("c"), name("j")
		r.Labels = map[string]string{}
		for k := 0; k < 8; k++ {
			r.Labels[fmt.Sprintf("%d%s", k, strings.Repeat("k", 252))] = strings.Repeat("\u00e9", 126) // 253 + 252 bytes
		}
		r.Error = plan.BoundText(strings.Repeat("\u00e9rror ", 10_000), plan.MaxErrorBytes)
		r.Step, r.StartedAt, r.FinishedAt, r.OperationalAt, r.CanceledAt, r.StepSince, r.DrainSince = plan.StepFailed, &at, &at, &at, &at, &at, &at
		r.Phases = &plan.Phases{Drained: &at, Off: &at, On: &at, Healthy: &at}
	}
	require.NoError(t, worst.Validate())
	pages, err := encodePages(worst)
	require.NoError(t, err)
	require.Len(t, pages, 1)
	require.LessOrEqual(t, len(pages[0]), maxTxnBytes, "a page at every bound")
	t.Logf("a page at every bound: %d bytes", len(pages[0]))
}
