package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/rebootkit/rebootkit/plan"
)

// DefaultTTL is the lease TTL of an executor's session, in seconds: how
// long a dead or paused leader keeps the leadership before another
// executor takes over.
const DefaultTTL = 5

// Candidate is one executor campaigning for the leadership of the
// executors that share a prefix.
type Candidate struct {
	Client *clientv3.Client
	// Prefix is the store's prefix; the election lives under
	// PREFIX "leader/".
	Prefix string
	// ID names the candidate (a host name); it is the election value.
	ID string
	// TTL is the session lease's TTL in seconds (default DefaultTTL).
	TTL int
}

// Leadership is a won election: a Store whose every write is fenced by
// it, and the fencing token for the fleet.
type Leadership struct {
	// Store writes only while this leadership holds (ErrNotLeader after).
	Store *Store
	// Rev is the election key's create revision: it grows with every new
	// leader, and is the actions' fencing token (plan.Action.Fence).
	Rev int64
	// Key is the election key held.
	Key      string
	session  *concurrency.Session
	election *concurrency.Election
}

func (c *Candidate) electionPrefix() string {
	p := c.Prefix
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p + "leader/"
}

// NewSession opens the candidate's session (a lease kept alive in the
// background); Campaign uses it. A session ends when its lease expires or
// is revoked (Done).
func (c *Candidate) NewSession(ctx context.Context) (*concurrency.Session, error) {
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	s, err := concurrency.NewSession(c.Client, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("etcd: session: %w", err)
	}
	return s, nil
}

// Campaign waits until the candidate leads (or ctx is done) on session s.
func (c *Candidate) Campaign(ctx context.Context, s *concurrency.Session) (*Leadership, error) {
	e := concurrency.NewElection(s, c.electionPrefix())
	if err := e.Campaign(ctx, c.ID); err != nil {
		return nil, fmt.Errorf("etcd: campaign: %w", err)
	}
	guard := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	return &Leadership{Store: NewStore(c.Client, c.Prefix).Guarded(guard), Rev: e.Rev(), Key: e.Key(), session: s, election: e}, nil
}

// Leader returns the current leader's ID and fencing token, or ok false
// when there is none.
func (c *Candidate) Leader(ctx context.Context) (id string, rev int64, ok bool, err error) {
	resp, err := c.Client.Get(ctx, c.electionPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, false, err
	}
	if len(resp.Kvs) == 0 {
		return "", 0, false, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, true, nil
}

// CheckLeader returns nil if token is the fencing token (Leadership.Rev)
// of the current leader under the candidates' prefix, else an error
// wrapping ErrNotLeader. A fleet that creates jobs must refuse an action
// whose token is not the current one, atomically with the creation: best
// by keeping its job records in this etcd and creating them in a
// transaction that compares the leader key (LeaderGuard); CheckLeader is
// for fleets that can only ask.
func (c *Candidate) CheckLeader(ctx context.Context, token int64) error {
	_, rev, ok, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if !ok || rev != token {
		return fmt.Errorf("%w: fencing token %d, current leader's %d", ErrNotLeader, token, rev)
	}
	return nil
}

// LeaderGuard is the comparison a fleet adds to the transaction that
// records a job, for an action with fencing token (Leadership.Rev) token
// under the candidates' prefix: it holds only while that leadership does.
func (c *Candidate) LeaderGuard(ctx context.Context, token int64) (clientv3.Cmp, error) {
	resp, err := c.Client.Get(ctx, c.electionPrefix(), clientv3.WithPrefix(), clientv3.WithMinCreateRev(token), clientv3.WithMaxCreateRev(token))
	if err != nil {
		return clientv3.Cmp{}, err
	}
	if len(resp.Kvs) == 0 {
		return clientv3.Cmp{}, fmt.Errorf("%w: no election key with fencing token %d", ErrNotLeader, token)
	}
	return clientv3.Compare(clientv3.CreateRevision(string(resp.Kvs[0].Key)), "=", token), nil
}

// Done is closed when the leadership's session ends (its lease expired or
// was revoked): the leadership is gone, although a write may tell first.
func (l *Leadership) Done() <-chan struct{} { return l.session.Done() }

// Resign gives the leadership up (the next candidate takes over at once).
func (l *Leadership) Resign(ctx context.Context) error { return l.election.Resign(ctx) }

// Pass runs one pass of every unfinished plan with the leadership's store
// and fencing token. It returns ErrNotLeader as soon as a write is refused
// for it: the caller must stop and campaign again.
func (l *Leadership) Pass(ctx context.Context, fleet plan.Fleet, cfg plan.Config, now func() time.Time, logger *slog.Logger) error {
	uuids, err := l.Store.Unfinished(ctx)
	if err != nil {
		return err
	}
	exec := &plan.Executor{Fleet: fleet, Store: l.Store, Config: cfg, Now: now, Logger: logger, Fence: l.Rev}
	var errs []error
	for _, uuid := range uuids {
		for try := 0; try < 3; try++ {
			_, err := exec.Pass(ctx, uuid)
			if errors.Is(err, ErrNotLeader) {
				return err
			}
			if errors.Is(err, plan.ErrConflict) {
				continue // an operator wrote in between: decide again
			}
			if err != nil {
				errs = append(errs, err)
			}
			break
		}
	}
	return errors.Join(errs...)
}

// Executor runs plans on etcd while it leads the executors of its prefix:
// any number of them (on different machines) campaign; the leader runs a
// pass of every unfinished plan each Interval, every write fenced by its
// leadership and every action carrying its fencing token; when it loses
// the leadership (its lease expired: it was paused, partitioned, or its
// machine rebooted) it stops and campaigns again.
type Executor struct {
	Candidate
	Fleet  plan.Fleet
	Config plan.Config
	// Now is the executor's clock (default time.Now).
	Now func() time.Time
	// Interval between passes (default 1 s).
	Interval time.Duration
	Logger   *slog.Logger
	// OnLead, if set, is called each time the executor becomes leader.
	OnLead func(l *Leadership)
}

// Run runs until ctx is done.
func (e *Executor) Run(ctx context.Context) error {
	now := e.Now
	if now == nil {
		now = time.Now
	}
	interval := e.Interval
	if interval <= 0 {
		interval = time.Second
	}
	for ctx.Err() == nil {
		s, err := e.NewSession(ctx)
		if err != nil {
			e.warn("session", err)
			sleep(ctx, interval)
			continue
		}
		l, err := e.Campaign(ctx, s)
		if err != nil {
			s.Close()
			if ctx.Err() == nil {
				e.warn("campaign", err)
				sleep(ctx, interval)
			}
			continue
		}
		if e.OnLead != nil {
			e.OnLead(l)
		}
		e.lead(ctx, l, now, interval)
		s.Close() // ends the lease: the next candidate takes over at once
	}
	return ctx.Err()
}

func (e *Executor) lead(ctx context.Context, l *Leadership, now func() time.Time, interval time.Duration) {
	for {
		if err := l.Pass(ctx, e.Fleet, e.Config, now, e.Logger); err != nil {
			if errors.Is(err, ErrNotLeader) {
				e.warn("leadership lost", err)
				return
			}
			e.warn("pass", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (e *Executor) warn(what string, err error) {
	if e.Logger != nil {
		e.Logger.Warn("etcd executor: "+what, "id", e.ID, "error", err.Error())
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
