package power_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"pgregory.net/rapid"
)

// bmcMode is how a simulated BMC behaves at the moment.
type bmcMode int

const (
	modeOK        bmcMode = iota
	modeWrongPass         // refuses the password (logins, and open sessions with 401)
	modeDown              // gone: connection refused at once
	modeHang              // accepts and never answers (honours the caller's deadline)
	modeStuck             // never answers and ignores the deadline until released
)

// simBMC is an in-memory BMC that records the ground truth the Pool is
// checked against: when each login came and how it ended, how many
// sessions are open, and whether a call reached it.
type simBMC struct {
	name string
	clk  *manualClock

	mu        sync.Mutex
	mode      bmcMode
	release   chan struct{} // closed to free stuck calls
	open      int
	maxOpen   int
	logins    []time.Time
	refusals  []time.Time // logins refused for the password
	resets    []time.Time // a host of this BMC changed its Config
	reached   int         // logins and calls that reached the BMC
	violation string
}

func (b *simBMC) connect(ctx context.Context, limit int) (power.Controller, error) {
	b.mu.Lock()
	b.reached++
	mode := b.mode
	now := b.clk.Now()
	b.logins = append(b.logins, now)
	release := b.release
	b.mu.Unlock()
	switch mode {
	case modeDown:
		return nil, errors.New("dial tcp: connection refused")
	case modeHang:
		<-ctx.Done()
		return nil, ctx.Err()
	case modeStuck:
		<-release
		return nil, errors.New("read: connection reset")
	case modeWrongPass:
		b.mu.Lock()
		b.refusals = append(b.refusals, now)
		b.mu.Unlock()
		return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Err: power.ErrAuth}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open++
	b.maxOpen = max(b.maxOpen, b.open)
	if b.open > limit && b.violation == "" {
		b.violation = fmt.Sprintf("%d sessions open on %s, the bound is %d", b.open, b.name, limit)
	}
	return &simCtrl{b: b}, nil
}

type simCtrl struct {
	b      *simBMC
	closed sync.Once
}

func (c *simCtrl) State(ctx context.Context) (power.State, error) {
	b := c.b
	b.mu.Lock()
	b.reached++
	mode, release := b.mode, b.release
	b.mu.Unlock()
	switch mode {
	case modeDown:
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassFailed, Message: "connection refused"}
	case modeHang:
		<-ctx.Done()
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassBusy, Err: ctx.Err()}
	case modeStuck:
		<-release
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassFailed, Message: "reset"}
	case modeWrongPass:
		now := b.clk.Now()
		b.mu.Lock()
		b.refusals = append(b.refusals, now) // the adapter's re-login, refused
		b.logins = append(b.logins, now)
		b.mu.Unlock()
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassFailed, Status: 401, Err: power.ErrAuth}
	}
	return power.StateOn, nil
}

func (c *simCtrl) On(ctx context.Context) error { _, err := c.State(ctx); return err }
func (c *simCtrl) Off(ctx context.Context, _ power.Mode) error {
	_, err := c.State(ctx)
	return err
}

func (c *simCtrl) Close() error {
	c.closed.Do(func() {
		c.b.mu.Lock()
		c.b.open--
		c.b.mu.Unlock()
	})
	return nil
}

// TestPoolStateMachine drives a Pool with hosts behind two BMCs through
// random worlds (a wrong password, a BMC gone, one that hangs, one stuck
// past every deadline, idle time, forgotten hosts, new credentials) and
// checks, against what the BMCs saw: never more sessions open on a BMC
// than the bound; after a refused login, no login within AuthBackoff unless
// the credentials changed; no call held past its deadline plus half a
// second; a call refused for back-off never reached the BMC.
func TestPoolStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		const maxSessions = 2
		const callTimeout = 30 * time.Millisecond
		authBackoff := 30 * time.Second
		clk := newClock()
		pool := power.NewPool(power.PoolConfig{Now: clk.Now, MaxSessions: maxSessions, CallTimeout: callTimeout,
			ConnectTimeout: callTimeout, IdleTimeout: 5 * time.Minute})
		bmcs := []*simBMC{{name: "A", clk: clk, release: make(chan struct{})}, {name: "B", clk: clk, release: make(chan struct{})}}
		defer func() {
			for _, b := range bmcs {
				b.mu.Lock()
				select {
				case <-b.release:
				default:
					close(b.release)
				}
				b.mu.Unlock()
			}
			_ = pool.Close()
		}()
		hosts := []string{"h0", "h1", "h2", "h3", "h4"}
		bmcOf := func(h string) *simBMC { return bmcs[map[string]int{"h0": 0, "h1": 0, "h2": 0, "h3": 1, "h4": 1}[h]] }
		version := map[string]int{}
		used := map[string]int{} // the version each host was last called with
		target := func(h string) power.Target {
			b := bmcOf(h)
			return power.Target{BMC: b.name, Config: fmt.Sprint(version[h]), Connect: func(ctx context.Context) (power.Controller, error) {
				return b.connect(ctx, maxSessions)
			}}
		}

		t.Repeat(map[string]func(*rapid.T){
			"call": func(t *rapid.T) {
				h := rapid.SampledFrom(hosts).Draw(t, "host")
				b := bmcOf(h)
				b.mu.Lock()
				before := b.reached
				if v, ok := used[h]; ok && v != version[h] {
					// The Pool sees the new credentials now: it may try
					// them at once (PoolConfig's documented exception).
					b.resets = append(b.resets, clk.Now())
				}
				used[h] = version[h]
				b.mu.Unlock()
				start := time.Now()
				_, err := pool.Controller(h, target(h)).State(context.Background())
				if took := time.Since(start); took > callTimeout+500*time.Millisecond {
					t.Fatalf("a call on %s took %s", h, took)
				}
				b.mu.Lock()
				after := b.reached
				b.mu.Unlock()
				if errors.Is(err, power.ErrBackoff) && after != before {
					t.Fatalf("a call refused for back-off reached BMC %s", b.name)
				}
			},
			"mode": func(t *rapid.T) {
				b := rapid.SampledFrom(bmcs).Draw(t, "bmc")
				m := rapid.SampledFrom([]bmcMode{modeOK, modeOK, modeWrongPass, modeDown, modeHang, modeStuck}).Draw(t, "mode")
				b.mu.Lock()
				if b.mode == modeStuck && m != modeStuck {
					close(b.release) // the stuck calls return now
					b.release = make(chan struct{})
				}
				b.mode = m
				b.mu.Unlock()
			},
			"advance": func(t *rapid.T) {
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(90*time.Second)).Draw(t, "d")))
			},
			"forget": func(t *rapid.T) {
				h := rapid.SampledFrom(hosts).Draw(t, "host")
				pool.Forget(h)
				delete(used, h)
			},
			"new credentials": func(t *rapid.T) {
				version[rapid.SampledFrom(hosts).Draw(t, "host")]++
			},
			"": func(t *rapid.T) {
				for _, b := range bmcs {
					b.mu.Lock()
					if b.violation != "" {
						v := b.violation
						b.mu.Unlock()
						t.Fatal(v)
					}
					for _, r := range b.refusals {
						for _, l := range b.logins {
							if l.After(r) && l.Sub(r) < authBackoff && !resetBetween(b.resets, r, l) {
								b.mu.Unlock()
								t.Fatalf("BMC %s refused a login at %s and got another %s later", b.name, r.Format(time.TimeOnly), l.Sub(r))
							}
						}
					}
					b.mu.Unlock()
				}
			},
		})
	})
}

// resetBetween reports whether credentials changed at an instant in
// [from, to].
func resetBetween(resets []time.Time, from, to time.Time) bool {
	for _, r := range resets {
		if !r.Before(from) && !r.After(to) {
			return true
		}
	}
	return false
}
