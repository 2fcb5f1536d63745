package inventory

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// passFixture is an executor over an inventory fleet of n servers, one
// running plan of all of them in a bbolt plan store, health checks that
// pass at once.
func passFixture(tb testing.TB, n int) (*plan.Executor, *Fleet, string) {
	tb.Helper()
	clk := fake.NewClock(time.Time{})
	var inv Inventory
	for i := range n {
		inv.Servers = append(inv.Servers, Server{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Hostname: fmt.Sprintf("cn%d", i), Platform: "1",
			BMC: BMC{Redfish: "https://bmc", Username: "u", PasswordEnv: "P"}, Health: Health{TCP: "h:1"}})
	}
	inv = reindex(inv)
	dir := tb.TempDir()
	f, err := OpenFleet(inv, filepath.Join(dir, "fleet.db"), Options{Now: clk.Now, Monotonic: clk.Monotonic, manual: true,
		Health: func(context.Context, Server) error { return nil }})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = f.Close() })
	st, err := plan.OpenBolt(filepath.Join(dir, "plans.db"))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	p, _, err := plan.Create(inv.PlanServers(), plan.CreateOptions{UUID: "bench", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(5), IgnoreWarnings: true, CreatedAt: clk.Now()})
	require.NoError(tb, err)
	require.NoError(tb, st.Create(context.Background(), p))
	_, err = plan.Command(context.Background(), st, "bench", plan.Run)
	require.NoError(tb, err)
	return &plan.Executor{Fleet: f, Store: st, Config: plan.Config{DrainTimeout: time.Hour, JobTimeout: time.Hour, ServicesTimeout: time.Hour}, Now: clk.Now}, f, "bench"
}

// reindex builds the inventory's lookup index, as Parse does.
func reindex(inv Inventory) Inventory {
	inv.byKey = map[string]int{}
	for i, s := range inv.Servers {
		inv.byKey[s.UUID], inv.byKey[s.Hostname] = i, i
	}
	return inv
}

// BenchmarkExecutorPass is the executor's own pass (plan store view,
// inventory fleet's ObserveView, the decision, the writes) over plans of
// 1k, 10k and 100k servers with 5 reboots in flight: its time and
// allocations stay flat (issue 38, 18; old code: every pass read the whole
// plan and health-checked every server, about 3.7 s at 100k).
func BenchmarkExecutorPass(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ex, _, id := passFixture(b, n)
			_, err := ex.Pass(context.Background(), id)
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := ex.Pass(context.Background(), id); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMB")
		})
	}
}

// TestObserveViewIsPartial: the executor's pass over a large plan uses
// ObserveView: it checks the health of the view's servers only, and lists
// in Offline a server outside the view that the fleet is power-cycling
// (issue 38, 18; old code: no ObserveView, every server checked at every
// pass).
func TestObserveViewIsPartial(t *testing.T) {
	ex, f, id := passFixture(t, 2000)
	checks := 0
	f.opts.Health = func(context.Context, Server) error { checks++; return nil }
	_, err := ex.Pass(context.Background(), id)
	require.NoError(t, err)
	assert.Less(t, checks, 50, "health checks in one pass of a 2000-server plan")
	// A server far outside the view whose power cycle has not settled.
	far := f.inv.Servers[1500].UUID
	_, err = f.hosts.modify(far, func(h *hostRecord) error { h.Watch = true; return nil })
	require.NoError(t, err)
	f.stepServer(context.Background(), far)
	st := ex.Store.(plan.ViewStore)
	v, err := st.GetView(context.Background(), id)
	require.NoError(t, err)
	require.False(t, v.Full())
	obs, err := f.ObserveView(context.Background(), v)
	require.NoError(t, err)
	assert.True(t, obs.Partial)
	assert.Contains(t, obs.Offline, far)
}
