package power_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharingFake is an in-memory controller whose session other hosts of its
// BMC share (as power/redfish's): Connect given a shared one makes a
// controller on it without a login.
type sharingFake struct {
	power.Controller
	logins *atomic.Int64
	open   *atomic.Int64 // sessions open (logins not yet closed)
}

func (s *sharingFake) SharesSession() bool { return true }
func (s *sharingFake) Close() error        { s.open.Add(-1); return nil }

// fleet makes the targets of a fleet of n hosts, perBMC hosts behind each
// BMC, all with the same credentials per BMC.
type fleet struct {
	hw     power.Controller
	logins atomic.Int64
	open   atomic.Int64
}

func (f *fleet) target(i, perBMC int) power.Target {
	bmc := fmt.Sprintf("https://bmc-%d-%d", perBMC, i/perBMC)
	return power.Target{BMC: bmc, Config: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
		if sh := power.ConnectInfoFrom(ctx).Shared; sh != nil {
			return &sharingFake{Controller: f.hw, logins: &f.logins, open: &f.open}, nil // no login
		}
		f.logins.Add(1)
		f.open.Add(1)
		return &sharingFake{Controller: f.hw, logins: &f.logins, open: &f.open}, nil
	}}
}

// alwaysOn is a controller of a host that is on, keeping no record (the
// fake's ground-truth log would grow with the calls).
type alwaysOn struct{}

func (alwaysOn) State(context.Context) (power.State, error) { return power.StateOn, nil }
func (alwaysOn) On(context.Context) error                   { return nil }
func (alwaysOn) Off(context.Context, power.Mode) error      { return nil }

func host(i int) string { return fmt.Sprintf("host-%06d", i) }

// fill makes n hosts known to pool and opens their sessions.
func (f *fleet) fill(tb testing.TB, pool *power.Pool, n, perBMC int) {
	ctx := context.Background()
	for i := range n {
		if _, err := pool.Controller(host(i), f.target(i, perBMC)).State(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkPoolStateFleet (issue 35, point 4): the cost of Pool.State at
// 1k, 10k and 100k hosts (four per BMC, one shared session each): a read on
// an open session, and a host that comes back after Forget (its
// controller made anew on its BMC's session). Flat across sizes.
// fake-read is the harness's own share: the fakes read without the Pool.
func BenchmarkPoolStateFleet(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		f := &fleet{hw: alwaysOn{}}
		pool := power.NewPool(power.PoolConfig{})
		f.fill(b, pool, n, 4)
		ctrls := make([]power.Controller, n)
		for i := range n {
			ctrls[i] = pool.Controller(host(i), f.target(i, 4))
		}
		ctx := context.Background()
		b.Run(fmt.Sprintf("hosts=%d/read", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				if _, err := ctrls[i].State(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A Controller made for each call, as kube and the inventory do
		// (the Target is the host's own, kept by the caller).
		targets, names := make([]power.Target, n), make([]string, n)
		for i := range n {
			targets[i], names[i] = f.target(i, 4), host(i)
		}
		b.Run(fmt.Sprintf("hosts=%d/read-new-controller", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				if _, err := pool.Controller(names[i], targets[i]).State(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("hosts=%d/forget-and-back", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				pool.Forget(host(i))
				if _, err := ctrls[i].State(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The harness alone (no Pool): each host's own fake controller,
		// as Connect makes it, read at the same stride, so that the
		// growth the fleet's memory brings to the reads above can be told
		// from the Pool's own.
		fakes := make([]power.Controller, n)
		for i := range n {
			c, err := targets[i].Connect(ctx)
			if err != nil {
				b.Fatal(err)
			}
			fakes[i] = c
		}
		b.Run(fmt.Sprintf("hosts=%d/fake-read", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				if _, err := fakes[i].State(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = pool.Close()
	}
}

// TestPoolCostFlatWithFleetSize (issue 35, point 4): adding hosts to a
// Pool that holds 20,000 costs about what it costs when it holds 1,000 (no
// work grows with the fleet: the Pool of the last round counted every
// host's entry at every login: 18× slower here). Measured as the best of
// seven batches after a collection, with a wide margin (8× for 20× the
// hosts), so that a busy machine does not fail it.
func TestPoolCostFlatWithFleetSize(t *testing.T) {
	const batch = 300
	cost := func(held int) time.Duration {
		f := &fleet{hw: alwaysOn{}}
		pool := power.NewPool(power.PoolConfig{})
		defer pool.Close()
		f.fill(t, pool, held, 1) // one BMC each: every host logs in
		best := time.Duration(1 << 62)
		next := held
		ctx := context.Background()
		for range 7 {
			runtime.GC()
			start := time.Now()
			for range batch {
				_, err := pool.Controller(host(next), f.target(next, 1)).State(ctx)
				require.NoError(t, err)
				next++
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(1_000), cost(20_000)
	t.Logf("%d logins with 1,000 hosts held: %s; with 20,000 held: %s (%.1f×)", batch, small, large, float64(large)/float64(small))
	assert.Less(t, large, 8*small, "the cost of a login grows with the hosts held")
}

// TestPoolForgetReturnsToBaseline (issue 35, point 5): 100,000 hosts come
// (half behind a BMC each, half four to a BMC) and go (Forget): the Pool
// keeps nothing of them, every session is closed, and the heap returns to
// its baseline.
func TestPoolForgetReturnsToBaseline(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	f := &fleet{hw: alwaysOn{}}
	pool := newPool(t, nil, power.PoolConfig{})
	base := heap()
	ctx := context.Background()
	layout := func(i int) power.Target {
		if i < n/2 {
			return f.target(i, 1)
		}
		return f.target(i, 4)
	}
	for i := range n {
		_, err := pool.Controller(host(i), layout(i)).State(ctx)
		require.NoError(t, err)
	}
	during := heap()
	h, e, _, live, _, _ := power.PoolSizes(pool)
	require.Equal(t, n, h)
	require.Equal(t, n/2+n/8, e)
	require.Equal(t, n/2+n/8, live, "one session per BMC")
	for i := range n {
		pool.Forget(host(i))
	}
	require.Eventually(t, func() bool { return f.open.Load() == 0 }, 10*time.Second, 10*time.Millisecond, "sessions left open")
	require.Eventually(t, func() bool {
		h, e, l, live, idle, parked := power.PoolSizes(pool)
		return h+e+l+live+idle+parked == 0
	}, 10*time.Second, 10*time.Millisecond, "the Pool keeps state of forgotten hosts")
	after := heap()
	t.Logf("heap %d KiB at the start, %d KiB with %d hosts, %d KiB after Forget", base>>10, during>>10, n, after>>10)
	assert.Less(t, after, base+2<<20, "the heap did not return to its baseline")
}
