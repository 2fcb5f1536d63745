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

// TestPassRereadsNoUnchangedPage (issue 37, point 5): a leader's passes
// read each page of the plan from etcd at most once (ground truth: the
// keys in etcd's answers): the pages a pass wrote, and those its view read
// and nobody changed, are taken from what the store read or wrote, at
// the header's version. Before, every pass read (and sent over the
// network) every page of its view again, a third of a pass at 100,000
// servers.
func TestPassRereadsNoUnchangedPage(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, "cached", 600, "")
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, "cached", fleet.Servers(), 60, clk.Now())))
	cli, read := keysRead(t)
	c := Candidate{Client: cli, Prefix: pre, ID: "x", TTL: 60}
	sess, err := c.NewSession(ctx)
	require.NoError(t, err)
	defer sess.Close()
	l, err := c.Campaign(ctx, sess)
	require.NoError(t, err)
	pass := func() {
		require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
		clk.Advance(30 * time.Second)
	}
	pass() // the first reads the plan's members (every page)
	read()
	txns0, _ := l.Store.Written()
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		pass()
		for _, k := range read() {
			if strings.HasPrefix(k, pre+"pages/") {
				seen[k]++
			}
		}
	}
	txns, _ := l.Store.Written()
	require.Greater(t, txns-txns0, int64(8), "the passes wrote")
	require.NotEmpty(t, fleet.JobsCreated())
	for k, n := range seen {
		assert.Equal(t, 1, n, "page %s read %d times in 20 passes", k, n)
	}
}

// TestViewCacheSeesOtherWriters (issue 37, point 5): the pages a store
// keeps between passes are used only while the plan's header is as the
// store last read or wrote it: after another store's command (header
// only) or edit of a reboot record, the leader's view is the one a fresh
// store reads, and the leader's next write keeps the edit.
func TestViewCacheSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, "others", 300, "")
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, "others", fleet.Servers(), 30, clk.Now())))
	l, _ := lead(t, pre, "x", 60)
	other := NewStore(newClient(t), pre)
	fresh := func() plan.View {
		v, err := NewStore(newClient(t), pre).GetView(ctx, "others")
		require.NoError(t, err)
		return v
	}
	edited := map[string]string{} // server UUID -> its last edit
	for i := 0; i < 10; i++ {
		require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
		clk.Advance(30 * time.Second)
		mark := fmt.Sprintf("edited %d", i)
		switch i % 3 {
		case 0: // an operator's command: the header alone
			_, err := plan.Command(ctx, other, "others", func(p plan.Plan) (plan.Plan, error) {
				p.Waiting = mark
				return p, nil
			})
			require.NoError(t, err)
		case 1: // an edit of the first reboot in flight
			_, err := plan.Edit(ctx, other, "others", func(p plan.Plan) (plan.Plan, error) {
				for k := range p.Reboots {
					if p.Reboots[k].Step.InFlight() {
						p.Reboots[k].Error = mark
						edited[p.Reboots[k].ServerUUID] = mark
						return p, nil
					}
				}
				return p, fmt.Errorf("nothing in flight")
			})
			require.NoError(t, err)
		}
		got, err := l.Store.GetView(ctx, "others")
		require.NoError(t, err)
		want := fresh()
		require.Equal(t, want.Version, got.Version)
		require.Equal(t, want.Plan, got.Plan, "pass %d: the leader's view is not what etcd holds", i)
		require.Equal(t, want.Index, got.Index)
		require.Equal(t, want.Pos, got.Pos)
		if i%3 == 1 {
			var marked int
			for _, r := range got.Reboots {
				marked += b2i(r.Error == mark)
			}
			require.Equal(t, 1, marked, "pass %d: the edit is not in the leader's view", i)
		}
	}
	require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
	// The leader's pass after an edit kept it (its write patched the
	// pages it read after the edit, not the ones it kept from before).
	p, err := other.Get(ctx, "others")
	require.NoError(t, err)
	require.NotEmpty(t, edited)
	for _, r := range p.Reboots {
		if mark, ok := edited[r.ServerUUID]; ok {
			assert.Equal(t, mark, r.Error, "the leader's pass lost the edit of %s", r.ServerUUID)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestPassFetchesNoUnchangedHeader (issue 37, point 5): a leader's passes
// neither fetch nor decode the plan's header while nobody else wrote it
// (ground truth: the header values in etcd's answers), although each pass
// reads the plan's state before every 16 jobs it creates: they compare
// the header's revision with the one the store last read or wrote. After
// another store's command the next pass fetches it again, and obeys it:
// a stop lets no job be created. Before, a pass fetched and decoded the
// header in Unfinished, in GetView and before every 16 jobs, tens of KB
// each time at 100,000 servers: more than half of the pass's CPU.
func TestPassFetchesNoUnchangedHeader(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, "fetch", 2000, "")
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, "fetch", fleet.Servers(), 200, clk.Now())))
	cli, read := valuesRead(t)
	c := Candidate{Client: cli, Prefix: pre, ID: "x", TTL: 60}
	sess, err := c.NewSession(ctx)
	require.NoError(t, err)
	defer sess.Close()
	l, err := c.Campaign(ctx, sess)
	require.NoError(t, err)
	hk := NewStore(cli, pre).headerKey("fetch")
	fetched := func() int {
		n := 0
		for _, k := range read() {
			n += b2i(k == hk)
		}
		return n
	}
	pass := func() {
		require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
		clk.Advance(30 * time.Second)
	}
	pass() // the first reads the header
	read()
	most := 0
	for i := 0; i < 12; i++ {
		jobs := len(fleet.JobsCreated())
		pass()
		require.Zero(t, fetched(), "pass %d fetched the header nobody else wrote", i)
		most = max(most, len(fleet.JobsCreated())-jobs)
	}
	require.Greater(t, most, 2*16, "the test needs passes that read the state several times")
	// Another store's stop: fetched again, and no job is created.
	_, err = plan.Command(ctx, NewStore(newClient(t), pre), "fetch", plan.Stop)
	require.NoError(t, err)
	jobs := len(fleet.JobsCreated())
	for i := 0; i < 3; i++ {
		pass()
	}
	require.Positive(t, fetched(), "the passes did not read the operator's write")
	require.Len(t, fleet.JobsCreated(), jobs, "jobs created after the stop")
	v, err := NewStore(newClient(t), pre).GetView(ctx, "fetch")
	require.NoError(t, err)
	require.Equal(t, plan.StateStopped, v.State)
}
