package power

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// review35avBMC is ground truth for one BMC: the sessions its Connects
// opened and not yet closed, and the most ever open at once.
type review35avBMC struct {
	open, most atomic.Int32
}

type review35avCtrl struct {
	b      *review35avBMC
	once   sync.Once
	delay  time.Duration
	failRd bool
}

func (c *review35avCtrl) State(ctx context.Context) (State, error) {
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return StateUnknown, ctx.Err()
		}
	}
	if c.failRd {
		return StateUnknown, ErrBusy
	}
	return StateOn, nil
}
func (c *review35avCtrl) On(ctx context.Context) error          { _, err := c.State(ctx); return err }
func (c *review35avCtrl) Off(ctx context.Context, _ Mode) error { _, err := c.State(ctx); return err }
func (c *review35avCtrl) Close() error {
	c.once.Do(func() { c.b.open.Add(-1) })
	return nil
}

// review35avCheck: per endpoint, nlive == len(live) and live <= MaxSessions.
func review35avCheck(p *Pool, slack int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, ep := range p.eps {
		if ep.nlive != len(ep.live) {
			return fmt.Errorf("BMC %s: nlive %d, len(live) %d", name, ep.nlive, len(ep.live))
		}
		if ep.nlive+ep.reserved > p.cfg.MaxSessions+slack {
			d := ""
			for s := range ep.live {
				d += fmt.Sprintf(" [inUse %d idle %v shared %v joins %d entries %d]", s.inUse, s.idle.on, s.cr.shared == s, s.joins, len(s.entries))
			}
			return fmt.Errorf("BMC %s: %d live sessions + %d reserved over MaxSessions %d (counted %d, logging %v):%s", name, ep.nlive, ep.reserved, p.cfg.MaxSessions, ep.sessions, ep.logging, d)
		}
	}
	return nil
}

// review35avBusy: a call or a login still runs.
func review35avBusy(p *Pool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ep := range p.eps {
		if ep.logging || ep.sessions != len(ep.live) {
			return true
		}
		for s := range ep.live {
			if s.inUse > 0 {
				return true
			}
		}
	}
	return false
}

// TestReview35av_NliveTracksLiveUnderChurn (issue 35 point 4, 3eeae45):
// churn of Forget, re-Target (new Login), failed Connects, caller
// cancellations, failing reads and Close; after every step (and from a
// watcher during the steps) nlive == len(ep.live), and each BMC's own
// count of open sessions stays within MaxSessions (+1: the documented
// unproven-credentials login / join allowance) and, once quiet, within
// MaxSessions.
func TestReview35av_NliveTracksLiveUnderChurn(t *testing.T) {
	const maxS, nBMC, nHost = 2, 2, 6
	bmcs := make([]*review35avBMC, nBMC)
	for i := range bmcs {
		bmcs[i] = &review35avBMC{}
	}
	for round := 0; round < 4; round++ {
		rng := rand.New(rand.NewSource(int64(round)))
		p := NewPool(PoolConfig{MaxSessions: maxS, LoginInterval: time.Millisecond, Backoff: time.Millisecond,
			MaxBackoff: 2 * time.Millisecond, AuthBackoff: time.Millisecond, MaxAuthBackoff: 2 * time.Millisecond,
			IdleTimeout: 20 * time.Millisecond, CallTimeout: 200 * time.Millisecond})
		var failConnect atomic.Int32 // percent
		target := func(h, login int) Target {
			b := bmcs[h%nBMC]
			return Target{BMC: fmt.Sprintf("bmc-%d", h%nBMC), Login: fmt.Sprintf("login-%d", login),
				Connect: func(ctx context.Context) (Controller, error) {
					if rand.Int31n(100) < failConnect.Load() {
						return nil, errors.New("connect refused")
					}
					n := b.open.Add(1)
					for {
						m := b.most.Load()
						if n <= m || b.most.CompareAndSwap(m, n) {
							break
						}
					}
					return &review35avCtrl{b: b, delay: time.Duration(rand.Intn(3)) * time.Millisecond, failRd: rand.Intn(10) == 0}, nil
				}}
		}
		stop := make(chan struct{})
		var watchErr atomic.Value
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := review35avCheck(p, 1); err != nil {
					watchErr.CompareAndSwap(nil, err)
				}
				for i, b := range bmcs {
					if n := b.open.Load(); n > maxS+1 {
						watchErr.CompareAndSwap(nil, fmt.Errorf("bmc-%d: %d sessions open at the BMC, bound %d(+1)", i, n, maxS))
					}
				}
				time.Sleep(50 * time.Microsecond)
			}
		}()
		logins := make([]int, nHost)
		quiet := 0
		for step := 0; step < 150; step++ {
			failConnect.Store(int32(rng.Intn(3) * 20))
			var cw sync.WaitGroup
			for g := 0; g < 8; g++ {
				h := rng.Intn(nHost)
				switch op := rng.Intn(10); {
				case op == 0:
					p.Forget(fmt.Sprintf("host-%d", h))
				case op == 1:
					logins[h] = rng.Intn(3) // re-Target: maybe another login
					p.Forget(fmt.Sprintf("host-%d", h))
				default:
					c := p.Controller(fmt.Sprintf("host-%d", h), target(h, logins[h]))
					d := time.Duration(rng.Intn(4)) * time.Millisecond
					cw.Add(1)
					go func() {
						defer cw.Done()
						ctx, cancel := context.WithTimeout(context.Background(), d+time.Millisecond)
						defer cancel()
						if op == 9 {
							_ = c.Off(ctx, ModeSoft)
						} else {
							_, _ = c.State(ctx)
						}
					}()
				}
			}
			cw.Wait()
			// Quiet: wait for the calls the callers gave up on to end (the
			// controller honours its context), then the bound holds exactly.
			for w := 0; w < 200 && review35avBusy(p); w++ {
				time.Sleep(time.Millisecond)
			}
			if err := CheckPoolInvariants(p); err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
			slack := 0
			if review35avBusy(p) {
				slack = 1
			} else { // ground truth: the BMC holds exactly the live sessions
				quiet++
				p.mu.Lock()
				for i, b := range bmcs {
					ep := p.eps[fmt.Sprintf("bmc-%d", i)]
					n := 0
					if ep != nil {
						n = ep.nlive
					}
					if got := int(b.open.Load()); got != n || got > maxS {
						p.mu.Unlock()
						t.Fatalf("round %d step %d: bmc-%d has %d sessions open, the Pool counts %d live (bound %d)", round, step, i, got, n, maxS)
					}
				}
				p.mu.Unlock()
			}
			if err := review35avCheck(p, slack); err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
			if v := watchErr.Load(); v != nil {
				t.Fatalf("round %d step %d: %v", round, step, v)
			}
			if step%10 == 0 {
				Sweep(p)
			}
		}
		t.Logf("round %d: %d of 150 steps checked quiet against the BMC", round, quiet)
		close(stop)
		wg.Wait()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := review35avCheck(p, 0); err != nil {
			t.Fatalf("round %d after Close: %v", round, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, b := range bmcs {
			for b.open.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		for i, b := range bmcs {
			if n := b.open.Load(); n != 0 {
				t.Fatalf("round %d: bmc-%d has %d sessions open after Close", round, i, n)
			}
			t.Logf("round %d bmc-%d: most open at once %d", round, i, b.most.Load())
		}
		p.mu.Lock()
		for name, ep := range p.eps {
			if ep.nlive != 0 || len(ep.live) != 0 {
				t.Errorf("round %d: BMC %s after Close: nlive %d, live %d", round, name, ep.nlive, len(ep.live))
			}
		}
		p.mu.Unlock()
	}
}
