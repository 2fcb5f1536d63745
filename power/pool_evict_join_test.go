package power_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowSharing is a controller whose session other hosts of its BMC share,
// and whose logout takes d (its start is signalled on started, if set).
type slowSharing struct {
	power.Controller
	d       time.Duration
	started chan<- struct{}
	open    *atomic.Int64
}

func (s *slowSharing) SharesSession() bool { return true }

func (s *slowSharing) Close() error {
	if s.started != nil {
		select {
		case s.started <- struct{}{}:
		default:
		}
	}
	time.Sleep(s.d)
	s.open.Add(-1)
	return nil
}

// TestPool_SameLoginWaitsForPendingEviction: a BMC at its bound of 2
// sessions (logins v1 and v2), login v3 proven there. Host A (v3) evicts
// the least recently used session and waits for its slow logout; host B,
// also v3, reads meanwhile. B is not refused as busy ("one was closed for
// a login less than a minute ago"): it waits for A's login and joins its
// session. Ground truth: the logins the BMC got with v3, and B's read.
func TestPool_SameLoginWaitsForPendingEviction(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	var open atomic.Int64
	var mu sync.Mutex
	logins := map[string]int{}
	started := make(chan struct{}, 1)
	target := func(login string) power.Target {
		return power.Target{BMC: "https://chassis", Config: login + "/" + "sys", Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			if power.ConnectInfoFrom(ctx).Shared != nil {
				return &slowSharing{Controller: alwaysOn{}, open: &open}, nil // no login
			}
			mu.Lock()
			logins[login]++
			mu.Unlock()
			open.Add(1)
			return &slowSharing{Controller: alwaysOn{}, d: 500 * time.Millisecond, started: started, open: &open}, nil
		}}
	}
	a := pool.Controller("a", target("v3"))
	_, err := a.State(ctx) // v3 proven on the BMC
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = pool.Controller("x", target("v1")).State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = pool.Controller("y", target("v2")).State(ctx) // trims A's session
	require.NoError(t, err)
	<-started
	time.Sleep(700 * time.Millisecond) // its logout ends
	clk.Advance(2 * time.Minute)

	aDone := make(chan error, 1)
	go func() { _, err := a.State(ctx); aDone <- err }()
	<-started // A's login evicted x's session; its logout runs
	_, err = pool.Controller("b", target("v3")).State(ctx)
	assert.NoError(t, err, "B, whose login A's eviction is for, was refused while that login was pending")
	require.NoError(t, <-aDone)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, logins["v3"], "ground truth: B joined A's session rather than logging in: %v", logins)
}
