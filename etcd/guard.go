package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// Guard returns the leadership as a reboot.Guard: the fence that
// reboot.Reconciler and remediation.Reconciler ask before every store
// write and power call (assumption A4), for controllers whose stores are
// not this etcd (an HA database's own inventory, say). It is the same
// fence as kube.LeaseGuard's: Hold answers only while the leadership's
// lease, as last renewed, cannot have run out (90 % of its TTL after the
// renewal was sent: the other candidates take the lease only its whole TTL
// after etcd received that renewal), renewing it and checking the
// election key first when less than half of that is left; the context it
// returns ends at that instant. A leader paused after Hold finds the
// context ended when it resumes; one paused before finds the lease gone.
// After Resign (called, not returned), Hold refuses at once and the
// contexts it returned before have ended; they end too as soon as the
// session ends (its lease revoked by Close, or expired) or a renewal
// finds the leadership gone.
//
// Errors wrap reboot.ErrNotLeader, and ErrNotLeader (the leadership is
// gone) or ErrInDoubt (etcd did not answer the renewal).
//
// Like kube.LeaseGuard, it assumes that the processes' clocks run at the
// same rate within 10 % over a TTL, and that a call sent before the
// context's end is not applied after it (a store that checks its context
// before it sends, a BMC call that is not delayed by seconds in the
// network). Writes to this etcd are better fenced in the transaction
// itself (Leadership.Store, Candidate.LeaderGuard).
func (l *Leadership) Guard() reboot.Guard { return leaderGuard{l} }

type leaderGuard struct{ l *Leadership }

func (g leaderGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	l := g.l
	l.mu.Lock()
	until := l.until
	lasts := l.ttl
	l.mu.Unlock()
	if err := l.acting(); err != nil || time.Until(until) < lasts*9/20 {
		if err := l.confirm(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", reboot.ErrNotLeader, err)
		}
		l.mu.Lock()
		until = l.until
		l.mu.Unlock()
	}
	if err := l.acting(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", reboot.ErrNotLeader, err)
	}
	c, cancel := context.WithDeadline(ctx, until)
	stop := context.AfterFunc(l.endedContext(), cancel)
	return c, func() { stop(); cancel() }, nil
}

// endedContext returns the context that ends when the leadership does:
// at Resign, when a renewal finds it lost (setLost), or when its session
// ends (the lease expired or was revoked: the next candidate may lead at
// once). One goroutine, started on first use, watches the session.
func (l *Leadership) endedContext() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == nil {
		l.ended, l.end = context.WithCancel(context.Background())
		ended, end, sessionDone := l.ended, l.end, l.session.Done()
		go func() {
			select {
			case <-sessionDone:
				end()
			case <-ended.Done():
			}
		}()
	}
	return l.ended
}

// giveUp marks the leadership lost and ends the contexts Hold returned:
// Resign calls it before it deletes the election key, so that this
// process stops acting before the next candidate can start.
func (l *Leadership) giveUp() {
	l.endedContext()
	l.mu.Lock()
	l.lost = true
	end := l.end
	l.mu.Unlock()
	end()
}
