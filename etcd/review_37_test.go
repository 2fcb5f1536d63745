package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// shardless is a fleet with no database shard: it is not a
// plan.ShardFleet (it hides the fake's FreezeShard), though its Observe
// reports a shard primary as the fake does. plan.Executor's doc: "A Fleet
// that is not a ShardFleet has no shard: the Executor ignores the
// ShardPrimary it reports and never freezes."
type shardless struct{ plan.Fleet }

// TestReview37_ShardlessFleetThroughLeadership: through plan.Executor the
// shardless fleet's plan completes; through a Leadership's Pass the
// executor's fleet is wrapped in leaderFleet, which always has
// FreezeShard/UnfreezeShard methods, so the Executor takes it for a
// ShardFleet, keeps the reported primary, decides a freeze, and the freeze
// fails every pass with errNoShard: the primary's reboot never starts and
// the plan never ends.
func TestReview37_ShardlessFleetThroughLeadership(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, 3)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
			Queue: time.Second, Drain: time.Second, Shutdown: time.Second, Boot: time.Minute, Services: time.Second}
	}
	ff := fake.NewFleet(clk.Now, "u001", fs...)
	fleet := shardless{ff}
	p, _, err := plan.Create(ff.Servers(), plan.CreateOptions{UUID: "p1", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), CreatedAt: clk.Now()})
	require.NoError(t, err)
	p, _ = plan.Run(p)
	st := NewStore(cli, pre)
	require.NoError(t, st.Create(ctx, p))
	cand := Candidate{Client: cli, Prefix: pre, ID: "exec", TTL: 60}
	s, err := cand.NewSession(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	l, err := cand.Campaign(ctx, s)
	require.NoError(t, err)
	var last error
	for i := 0; i < 200; i++ {
		last = l.Pass(ctx, fleet, plan.Config{}, clk.Now, nil)
		clk.Advance(30 * time.Second)
		q, err := st.Get(ctx, "p1")
		require.NoError(t, err)
		if !q.Unfinished() {
			assert.Equal(t, plan.StateComplete, q.State, plan.Table(q))
			frozen, _ := ff.Frozen()
			assert.False(t, frozen)
			return
		}
	}
	q, _ := st.Get(ctx, "p1")
	t.Fatalf("a shardless fleet's plan never ended through the Leadership (last pass error: %v):\n%s", last, plan.Table(q))
}

// refusing refuses every job of one server (a fleet that keeps refusing
// it: a BMC-less host, a quota, a permission): that plan's pass fails
// every time, with the fault kept on.
type refusing struct {
	*fake.Fleet
	server string
}

func (f refusing) CreateJob(ctx context.Context, a plan.Action) error {
	if a.Server == f.server {
		return fmt.Errorf("test: the fleet refuses jobs for %s", a.Server)
	}
	return f.Fleet.CreateJob(ctx, a)
}

// TestReview37_RetentionRunsWhileAPlanFails: Executor.lead runs Maintain
// (prune and sweep) only after a pass with no error at all
// (executor.go: "if err == nil && time.Since(maintained) >=
// maintainEvery"). One plan whose pass fails every time (a server the
// fleet keeps refusing; a corrupt header, which Prune leaves "for a person
// to look at", makes Unfinished report ErrCorrupt every pass too) switches
// retention off for every plan: the ended plan here is never even marked
// ended (the first step of Prune), so nothing is ever pruned and etcd
// fills up as before issue 37.
func TestReview37_RetentionRunsWhileAPlanFails(t *testing.T) {
	for _, fault := range []string{"refused", "corrupt"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			cli := newClient(t)
			pre := prefix(t)
			clk := fake.NewClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
			fleet := fleetOf(clk, "a", 3, "")
			st := NewStore(cli, pre)
			// An ended plan (canceled before it started).
			done, _, err := plan.Create(fleetOf(clk, "d", 2, "").Servers(), plan.CreateOptions{UUID: "d", Target: "2", Select: plan.SelectAll,
				Concurrency: plan.Count(1), CreatedAt: clk.Now()})
			require.NoError(t, err)
			done, err = plan.Cancel(done)
			require.NoError(t, err)
			require.NoError(t, st.Create(ctx, done))
			refused := "nobody"
			switch fault {
			case "refused":
				// A running plan whose first server the fleet keeps refusing.
				require.NoError(t, st.Create(ctx, runningPlan(t, "a", fleet.Servers(), 1, clk.Now())))
				refused = "a-u00000"
			case "corrupt":
				// An unfinished plan whose header became unreadable: Unfinished
				// reports ErrCorrupt on every pass (TestUnfinishedReportsCorruptHeader).
				require.NoError(t, st.Create(ctx, runningPlan(t, "b", fleetOf(clk, "b", 1, "").Servers(), 1, clk.Now())))
				_, err := cli.Put(ctx, pre+"headers/b", `{"plan":`)
				require.NoError(t, err)
			}
			e := &Executor{Candidate: Candidate{Client: cli, Prefix: pre, ID: "x", TTL: 5}, Fleet: refusing{fleet, refused},
				Now: clk.Now, Interval: 50 * time.Millisecond, Retention: time.Hour}
			rctx, cancel := context.WithCancel(ctx)
			finished := make(chan struct{})
			go func() { defer close(finished); _ = e.Run(rctx) }()
			defer func() { cancel(); <-finished }()
			deadline := time.Now().Add(5 * time.Second)
			for {
				h, _, _, err := st.readHeader(ctx, "d")
				require.NoError(t, err)
				if h.Ended != nil {
					return // Maintain ran
				}
				if time.Now().After(deadline) {
					t.Fatalf("the leader never ran Maintain (the ended plan was never marked ended, so it is never pruned) while another plan's pass kept failing (%s)", fault)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestReview37_WorstPageWithEscapedBytes: TestWorstRecordPageFits fills
// the bounded fields with letters and 'é', which JSON writes as they are;
// encoding/json writes '<', '>' and '&' as \u003c (6 bytes for 1), so the
// byte bounds (MaxLabelBytes, MaxNameBytes, MaxErrorBytes) let a stored
// record grow about six times what the test measured: a page of records
// within every bound is 1.15 MB here (the closing note says 220 KB), over
// maxTxnBytes (1 MiB), the bound the store cuts its transactions to. Under
// etcd's default 1.5 MiB request limit still, so no plan wedges today: the
// margin is what is gone. Bound the encoded size (or encode with
// SetEscapeHTML(false)).
func TestReview37_WorstPageWithEscapedBytes(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := runningPlan(t, "w", fleetOf(clk, "w", PageSize, "").Servers(), 1, clk.Now())
	// 64 labels (the most Validate allows) of '<' only, MaxLabelBytes in
	// all: keys "<", "<<", ... and the rest in the values.
	labels := map[string]string{}
	n := 0
	for k := 1; k <= 64; k++ {
		labels[strings.Repeat("<", k)] = ""
		n += k
	}
	for k := 1; k <= 64 && n < plan.MaxLabelBytes; k++ {
		v := min(253, plan.MaxLabelBytes-n)
		labels[strings.Repeat("<", k)] = strings.Repeat("<", v)
		n += v
	}
	at := clk.Now()
	worst := p.Clone()
	for i := range worst.Reboots {
		r := &worst.Reboots[i]
		r.Labels = labels
		name := fmt.Sprintf("%02d", i) + strings.Repeat("<", plan.MaxNameBytes-2)
		r.ServerHostname, r.BootPlatform, r.CurrentPlatform = name, name, name
		r.Error = plan.BoundText(strings.Repeat("<", 10_000), plan.MaxErrorBytes)
		r.Step, r.StartedAt, r.FinishedAt, r.OperationalAt, r.CanceledAt, r.StepSince, r.DrainSince = plan.StepFailed, &at, &at, &at, &at, &at, &at
	}
	require.NoError(t, worst.Validate(), "labels of %d bytes", n)
	pages, err := encodePages(worst)
	require.NoError(t, err)
	t.Logf("page: %d bytes, maxTxnBytes %d", len(pages[0]), maxTxnBytes)
	assert.LessOrEqual(t, len(pages[0]), maxTxnBytes, "a page of records within every bound is %d bytes", len(pages[0]))
}
