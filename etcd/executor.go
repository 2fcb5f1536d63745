package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	guard    clientv3.Cmp

	// turns shares each pass's time among its plans (plan.Turns).
	turns plan.Turns

	mu sync.Mutex
	// until is when the leadership stops acting unless confirmed again
	// (confirm): the lease was renewed at least its TTL before, so it
	// lasts at least until then.
	until time.Time
	// ttl is the lease's TTL as last renewed.
	ttl time.Duration
	// lost is set once a confirmation found the leadership gone, or by
	// Resign.
	lost bool
	// ended is done once Resign is called, a renewal finds the
	// leadership lost, the session ends or the election key is seen
	// deleted (watchKey, once Guard's Hold ran); the contexts Guard's Hold
	// returns end with it (made on first use: endedContext).
	ended context.Context
	end   context.CancelFunc
	// swept is the revision the last Maintain's SweepOrphans returned.
	swept int64
}

// ShardFencer is a plan.Fleet whose shard freezes check the executor's
// fencing token (Leadership.Rev) as its jobs do, atomically with the
// freeze or unfreeze: refused when the token is not the current leader's.
// A Leadership's passes call these instead of FreezeShard and
// UnfreezeShard.
type ShardFencer interface {
	FreezeShardFenced(ctx context.Context, token int64) error
	UnfreezeShardFenced(ctx context.Context, token int64) error
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
	return &Leadership{Store: NewStore(c.Client, c.Prefix).Guarded(guard), Rev: e.Rev(), Key: e.Key(), session: s, election: e, guard: guard}, nil
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
// The leadership stops acting before the election key is deleted, even if
// Resign fails: its Guard refuses, and the contexts Hold returned end.
func (l *Leadership) Resign(ctx context.Context) error {
	l.giveUp()
	return l.election.Resign(ctx)
}

// ErrInDoubt: the leadership could not be confirmed (etcd did not answer
// in time), or the pass took so long that its lease may have run out
// since; the pass did not act (any more). The next pass confirms again,
// unless the session ends meanwhile.
var ErrInDoubt = errors.New("etcd: leadership not confirmed")

// confirm renews the lease once and checks that the election key is still
// this leadership's; it returns ErrNotLeader if either is gone, ErrInDoubt
// if etcd did not say.
func (l *Leadership) confirm(ctx context.Context) error {
	select {
	case <-l.session.Done():
		return fmt.Errorf("%w: the session ended", ErrNotLeader)
	default:
	}
	cli := l.session.Client()
	sent := time.Now()
	cctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	ka, err := cli.KeepAliveOnce(cctx, l.session.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.setLost()
		return fmt.Errorf("%w: its lease expired", ErrNotLeader)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInDoubt, err)
	}
	resp, err := cli.Txn(cctx).If(l.guard).Commit()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInDoubt, err)
	}
	if !resp.Succeeded {
		l.setLost()
		return fmt.Errorf("%w: its election key is gone", ErrNotLeader)
	}
	lasts := time.Duration(ka.TTL) * time.Second
	l.mu.Lock()
	if until := sent.Add(lasts - lasts/10); until.After(l.until) {
		l.until = until
	}
	l.ttl = lasts
	l.mu.Unlock()
	return nil
}

// setLost marks the leadership lost and ends the contexts Hold returned.
func (l *Leadership) setLost() { l.giveUp() }

// renewing confirms the leadership again every third of its lease TTL
// until the returned function is called: a pass that lasts longer than
// the lease goes on acting while its lease, as renewed, is alive, and
// stops at once when a renewal finds the leadership gone.
func (l *Leadership) renewing(ctx context.Context) (stop func()) {
	l.mu.Lock()
	every := max(l.ttl/3, 100*time.Millisecond)
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := l.confirm(ctx); errors.Is(err, ErrNotLeader) {
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// confirmTimeout bounds the confirmation of a leadership.
const confirmTimeout = 2 * time.Second

// acting returns nil while the leadership may act: its session has not
// ended (else ErrNotLeader) and its lease, as last confirmed, cannot have
// run out (else ErrInDoubt).
func (l *Leadership) acting() error {
	select {
	case <-l.session.Done():
		return fmt.Errorf("%w: the session ended", ErrNotLeader)
	default:
	}
	l.mu.Lock()
	until, lost := l.until, l.lost
	l.mu.Unlock()
	if lost {
		return fmt.Errorf("%w: a renewal found it gone", ErrNotLeader)
	}
	if !time.Now().Before(until) {
		return fmt.Errorf("%w: its lease may have run out since it was last confirmed", ErrInDoubt)
	}
	return nil
}

// leaderFleet passes actions to the fleet only while the leadership may
// act. It has the fleet's optional abilities, and only those
// (Leadership.fleet picks the wrapper): a fleet without a shard stays
// one, so the plan's Executor never freezes through it.
type leaderFleet struct {
	plan.Fleet
	l *Leadership
}

func (f leaderFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if err := f.l.acting(); err != nil {
		return err
	}
	return f.Fleet.CreateJob(ctx, a)
}

func (f leaderFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if err := f.l.acting(); err != nil {
		return err
	}
	return f.Fleet.CancelJob(ctx, a)
}

// leaderShard is the plan.ShardFleet ability of a leaderFleet whose fleet
// has a shard: it freezes fenced when the fleet can (ShardFencer).
type leaderShard struct {
	f plan.Fleet
	l *Leadership
}

func (s leaderShard) FreezeShard(ctx context.Context) error {
	if err := s.l.acting(); err != nil {
		return err
	}
	if sf, ok := s.f.(ShardFencer); ok {
		return sf.FreezeShardFenced(ctx, s.l.Rev)
	}
	return s.f.(plan.ShardFleet).FreezeShard(ctx)
}

func (s leaderShard) UnfreezeShard(ctx context.Context) error {
	if err := s.l.acting(); err != nil {
		return err
	}
	if sf, ok := s.f.(ShardFencer); ok {
		return sf.UnfreezeShardFenced(ctx, s.l.Rev)
	}
	return s.f.(plan.ShardFleet).UnfreezeShard(ctx)
}

// leaderHead is the plan.HeadnodeFleet ability, leaderView the
// plan.ViewFleet one, of a leaderFleet whose fleet has it.
type (
	leaderHead struct{ plan.HeadnodeFleet }
	leaderView struct{ vf plan.ViewFleet }
)

func (v leaderView) ObserveView(ctx context.Context, pv plan.View) (plan.Observations, error) {
	return v.vf.ObserveView(ctx, pv)
}

// The leaderFleet wrappers, one per set of abilities (S: shard, H:
// headnode, V: views).
type (
	leaderS struct {
		leaderFleet
		leaderShard
	}
	leaderH struct {
		leaderFleet
		leaderHead
	}
	leaderV struct {
		leaderFleet
		leaderView
	}
	leaderSH struct {
		leaderFleet
		leaderShard
		leaderHead
	}
	leaderSV struct {
		leaderFleet
		leaderShard
		leaderView
	}
	leaderHV struct {
		leaderFleet
		leaderHead
		leaderView
	}
	leaderSHV struct {
		leaderFleet
		leaderShard
		leaderHead
		leaderView
	}
)

// fleet wraps fleet in the leaderFleet with its abilities: a
// plan.ShardFleet only if fleet is one (or a ShardFencer), a
// plan.HeadnodeFleet and a plan.ViewFleet only if fleet is one.
func (l *Leadership) fleet(fleet plan.Fleet) plan.Fleet {
	lf := leaderFleet{Fleet: fleet, l: l}
	_, isShard := fleet.(plan.ShardFleet)
	if _, fenced := fleet.(ShardFencer); fenced {
		isShard = true
	}
	sh := leaderShard{f: fleet, l: l}
	hf, isHead := fleet.(plan.HeadnodeFleet)
	hd := leaderHead{hf}
	vf, isView := fleet.(plan.ViewFleet)
	vw := leaderView{vf}
	switch {
	case isShard && isHead && isView:
		return leaderSHV{lf, sh, hd, vw}
	case isShard && isHead:
		return leaderSH{lf, sh, hd}
	case isShard && isView:
		return leaderSV{lf, sh, vw}
	case isHead && isView:
		return leaderHV{lf, hd, vw}
	case isShard:
		return leaderS{lf, sh}
	case isHead:
		return leaderH{lf, hd}
	case isView:
		return leaderV{lf, vw}
	}
	return lf
}

// Pass runs one pass of every unfinished plan with the leadership's store
// and fencing token. It first confirms the leadership (renews its lease
// and checks its election key), confirms it again every third of the
// lease TTL while the pass lasts, and acts on the fleet only while the
// lease, as last confirmed, cannot have run out: it returns ErrNotLeader as
// soon as the leadership is gone or may be (the caller must stop and
// campaign again), ErrInDoubt when etcd did not answer the confirmation
// (nothing was done). A plan header that cannot be read is reported in the
// error (wrapping plan.ErrCorrupt) after the other plans' passes. Each
// plan's pass has its own share of what is left of ctx (plan.Turns: an
// equal one among the plans left that can act, and a plan cut short runs
// last in a next pass, with everything the others left), and each fleet call its own
// deadline within it (plan.Executor.CallTimeout): a plan whose call hangs
// never starves the others, and a plan whose pass needs more than its
// share still moves.
func (l *Leadership) Pass(ctx context.Context, fleet plan.Fleet, cfg plan.Config, now func() time.Time, logger *slog.Logger) error {
	if err := l.confirm(ctx); err != nil {
		return err
	}
	defer l.renewing(ctx)()
	turns, err := l.Store.turns(ctx)
	if err != nil && !errors.Is(err, plan.ErrCorrupt) {
		return err
	}
	errs := []error{err}
	exec := &plan.Executor{Fleet: l.fleet(fleet), Store: l.Store, Config: cfg, Now: now, Logger: logger, Fence: l.Rev}
	// Each plan has its own share of what is left of the pass
	// (plan.Turns): a plan whose fleet call hangs never starves the
	// others, and a plan cut short runs last in a next pass, with
	// everything the others left.
	perrs, err := l.turns.Run(ctx, turns, func(err error) bool { return errors.Is(err, ErrNotLeader) },
		func(ctx context.Context, uuid string) error { return l.passPlan(ctx, exec, uuid) })
	if err != nil {
		return err
	}
	return errors.Join(append(errs, perrs...)...)
}

// passPlan runs the pass of one plan, deciding again (up to three times)
// when an operator wrote in between (then the next pass goes on).
func (l *Leadership) passPlan(ctx context.Context, exec *plan.Executor, uuid string) error {
	for try := 0; try < 3; try++ {
		_, err := exec.Pass(ctx, uuid)
		if !errors.Is(err, plan.ErrConflict) {
			return err
		}
	}
	return nil
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
	// PassTimeout bounds a pass (default DefaultPassTimeout); a pass also
	// ends when the leadership's session does.
	PassTimeout time.Duration
	// After paces the executor: the wait between passes and after a
	// failed session or campaign (default time.After). Give it the
	// clock Now reads (a simulated one in tests) so that Interval is on
	// that clock. The lease's TTL stays on real time: etcd keeps it.
	After func(d time.Duration) <-chan time.Time
	// Retention is how long a plan that ended is kept whole before the
	// leader replaces it with its summary (Store.Prune); 0 means
	// DefaultRetention, a negative value forever.
	Retention time.Duration
}

func (e *Executor) after(d time.Duration) <-chan time.Time {
	if e.After != nil {
		return e.After(d)
	}
	return time.After(d)
}

// maintainEvery is how often a leader prunes and sweeps (Maintain): on
// its own timer, after the pass that comes due, whatever the passes
// returned.
const maintainEvery = 10 * time.Minute

// Maintain prunes the plans that ended more than retention ago (Prune;
// none if retention < 0), sweeps the unreferenced pages of the others
// (Sweep) and the pages of UUIDs without a header written before the
// previous Maintain of this leadership (SweepOrphans), with the
// leadership's fenced store.
func (l *Leadership) Maintain(ctx context.Context, now time.Time, retention time.Duration) error {
	var errs []error
	if retention >= 0 {
		if _, err := l.Store.Prune(ctx, now, now.Add(-retention)); err != nil {
			errs = append(errs, err)
		}
	}
	uuids, err := l.Store.Unfinished(ctx)
	errs = append(errs, err)
	for _, uuid := range uuids {
		if _, err := l.Store.Sweep(ctx, uuid); err != nil {
			errs = append(errs, err)
		}
	}
	l.mu.Lock()
	before := l.swept
	l.mu.Unlock()
	// Saved even when a group's delete failed: the read moved the sweep
	// key to at, and the next call deletes only if given it (0: the read
	// failed, the key may not have moved).
	_, at, err := l.Store.SweepOrphans(ctx, before)
	errs = append(errs, err)
	if at != 0 {
		l.mu.Lock()
		l.swept = at
		l.mu.Unlock()
	}
	return errors.Join(errs...)
}

// DefaultPassTimeout is how long an Executor's pass may take.
const DefaultPassTimeout = time.Minute

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
			e.sleep(ctx, interval)
			continue
		}
		l, err := e.Campaign(ctx, s)
		if err != nil {
			s.Close()
			if ctx.Err() == nil {
				e.warn("campaign", err)
				e.sleep(ctx, interval)
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
	timeout := e.PassTimeout
	if timeout <= 0 {
		timeout = DefaultPassTimeout
	}
	retention := e.Retention
	if retention == 0 {
		retention = DefaultRetention
	}
	var maintained time.Time
	for {
		// A pass ends when its session does: nothing is asked of etcd or
		// the fleet after that.
		pctx, cancel := context.WithTimeout(ctx, timeout)
		stop := make(chan struct{})
		go func() {
			select {
			case <-l.Done():
				cancel()
			case <-stop:
			}
		}()
		err := l.Pass(pctx, e.Fleet, e.Config, now, e.Logger)
		close(stop)
		cancel()
		// Retention runs on its own timer, whatever the passes return (a
		// plan whose pass fails every time never switches it off), while
		// the leadership holds.
		if !errors.Is(err, ErrNotLeader) && time.Since(maintained) >= maintainEvery {
			maintained = time.Now()
			e.maintain(ctx, l, now, retention, timeout)
		}
		if err != nil {
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
		case <-e.after(interval):
		}
	}
}

// maintain runs the leadership's Maintain, bounded by timeout and ended
// with the leadership's session.
func (e *Executor) maintain(ctx context.Context, l *Leadership, now func() time.Time, retention, timeout time.Duration) {
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-l.Done():
			cancel()
		case <-stop:
		}
	}()
	if err := l.Maintain(mctx, now(), retention); err != nil {
		e.warn("prune and sweep", err)
	}
}

func (e *Executor) warn(what string, err error) {
	if e.Logger != nil {
		e.Logger.Warn("etcd executor: "+what, "id", e.ID, "error", err.Error())
	}
}

func (e *Executor) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-e.after(d):
	}
}
