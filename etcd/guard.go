package etcd

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/reboot"
)

// Guard returns the leadership as a reboot.Guard (and reboot.GuardTerm): the fence that
// reboot.Reconciler and remediation.Reconciler ask before every store
// write and power call (assumption A4), for controllers whose stores are
// not this etcd (an HA database's own inventory, say). It is the same
// fence as kube.LeaseGuard's: Hold answers only while the leadership's
// lease, as last renewed, cannot have run out (90 % of its TTL after the
// renewal was sent: the other candidates take the lease only its whole TTL
// after etcd received that renewal), renewing it and checking the
// election key first when less than half of that is left; the context it
// returns ends at that instant, and its Err compares the clock with that
// instant (reboot.ClockBound): a leader paused after Hold finds the
// context ended when it resumes, before the deadline's timer fires; one
// paused before finds the lease gone. A leader paused after its store's
// last check of the context can still land that one write late: fence
// writes to this etcd in their transaction (Cmp).
// After Resign (called, not returned), Hold refuses at once and the
// contexts it returned before have ended. So it is, within a watch's
// latency (milliseconds on a healthy cluster), once the election key is
// deleted or the lease revoked, by Close or from outside (`etcdctl del`
// of the key, `etcdctl lease revoke`: the next candidate leads at once):
// a watch on the key, from the election's revision, sees the deletion,
// and a watch that fails (no etcd leader, etcd unreachable) is replaced
// by a read of the key and a new watch. Likewise once the session ends
// (the lease expired) or a renewal finds the leadership gone. Whatever
// the watch sees, Hold and its contexts never outlast the lease's bound
// above.
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
	if !time.Now().Before(until) {
		// Paused past the lease's end since it was read.
		return nil, nil, fmt.Errorf("%w: %w: the lease may have ended", reboot.ErrNotLeader, ErrInDoubt)
	}
	c, cancel := context.WithDeadline(ctx, until)
	stop := context.AfterFunc(l.endedContext(), cancel)
	return reboot.ClockBound(c), func() { stop(); cancel() }, nil
}

// Term implements reboot.GuardTerm: the leadership's fencing token (Rev)
// while it may act (not resigned, not found lost, its session not ended,
// confirmed by a Hold and its lease not possibly run out since), else
// zero.
// A Leadership once lost is never held again (a new Campaign returns a new
// one, with a new Rev), and while it acts its lease was renewed without a
// break: a Hold refused in doubt meanwhile kept the same lease.
func (g leaderGuard) Term() uint64 {
	if g.l.acting() != nil {
		return 0
	}
	return uint64(g.l.Rev)
}

var _ reboot.GuardTerm = leaderGuard{}

// Cmp is the leadership's fencing comparison: the election key still
// exists with this leadership's create revision (Rev). Add it to the
// transactions of your own stores in this etcd: a write so fenced cannot
// land after the leadership ended, even from a process paused after the
// Guard's last check (which a Guard's context alone cannot stop).
// Leadership.Store's writes carry it.
func (l *Leadership) Cmp() clientv3.Cmp { return l.guard }

// endedContext returns the context that ends when the leadership does:
// at Resign, when a renewal finds it lost (setLost), when its session
// ends (the lease expired or was revoked: the next candidate may lead at
// once), or when its election key is deleted (by hand, or with its lease
// revoked: the next candidate leads at once, while the session learns it
// only at its next keep-alive, a third of the TTL later). Two goroutines,
// started on first use, watch the session and the election key.
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
		go l.watchKey(ended)
	}
	return l.ended
}

// watchKey marks the leadership lost (setLost) as soon as its election key
// is deleted or created again (a create revision other than Rev), until
// ctx ends. It watches from Rev, so a deletion before it started is seen
// too; when the watch fails (compacted history, no etcd leader, etcd
// unreachable) it reads the key to tell, and watches again from there,
// retrying with a back-off (the lease's bound, until, fences meanwhile).
func (l *Leadership) watchKey(ctx context.Context) {
	cli := l.session.Client()
	rev := l.Rev
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, l.Key, clientv3.WithRev(rev)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != l.Rev {
					cancel()
					l.setLost()
					return
				}
			}
			rev, wait = resp.Header.Revision+1, 100*time.Millisecond
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		gctx, gcancel := context.WithTimeout(ctx, confirmTimeout)
		got, err := cli.Get(gctx, l.Key)
		gcancel()
		if err == nil && (len(got.Kvs) == 0 || got.Kvs[0].CreateRevision != l.Rev) {
			l.setLost()
			return
		}
		if err == nil {
			rev = got.Header.Revision + 1
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
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
