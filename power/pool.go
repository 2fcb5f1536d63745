package power

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrBackoff is matched (errors.Is) by the error of a call the Pool did not
// try because the BMC is backing off after a failure. The same error also
// matches the failure that started the back-off (ErrAuth, for example).
var ErrBackoff = errors.New("power: not tried, the BMC is backing off after a failure")

// ErrPoolClosed is returned by calls on a closed Pool.
var ErrPoolClosed = errors.New("power: pool closed")

// Target says how to reach the power controller of one host.
type Target struct {
	// BMC names the BMC the host is behind (its endpoint URL or host:port).
	// Back-off and the session bound are per BMC: hosts behind one BMC
	// (blades, multi-node chassis) share them.
	BMC string
	// Config identifies the configuration Connect uses for this host (for
	// example the address, the system, the credentials' version and the
	// TLS settings). It must stay the same while the configuration does:
	// when it changes, the host's cached controller is closed and the
	// BMC's back-off cleared (new credentials deserve a prompt try).
	Config string
	// Connect opens the controller (a login: a Redfish session or an IPMI
	// session). The Pool calls it with a deadline (PoolConfig.ConnectTimeout)
	// and at most one at a time per BMC. The controller it returns should
	// implement Close() error or CloseContext(context.Context) error.
	Connect func(ctx context.Context) (Controller, error)
}

// PoolConfig tunes a Pool. Zero fields take the defaults given.
type PoolConfig struct {
	// CallTimeout bounds every State, On and Off call (default 30 s); the
	// caller's own deadline applies as well.
	CallTimeout time.Duration
	// ConnectTimeout bounds every Target.Connect (default 30 s).
	ConnectTimeout time.Duration
	// IdleTimeout: a controller unused this long is closed (default 5 min).
	IdleTimeout time.Duration
	// MaxSessions bounds the controllers open at once per BMC (default 2).
	// A host whose BMC is at the bound gets the least recently used idle
	// controller of that BMC closed for it, or waits until one is idle.
	MaxSessions int
	// Backoff is the first pause after a failure that is not an
	// authentication failure (default 1 s); each further failure in a row
	// doubles it, up to MaxBackoff (default 2 min).
	Backoff, MaxBackoff time.Duration
	// AuthBackoff is the first pause after an authentication failure
	// (default 30 s: at most two logins a minute with a wrong password);
	// each further one in a row doubles it, up to MaxAuthBackoff (default
	// 30 min).
	AuthBackoff, MaxAuthBackoff time.Duration
	// Now is the clock of back-off and idleness (default time.Now).
	Now func() time.Time
	// Logger, if set, gets a line when a BMC starts backing off and when a
	// controller is closed.
	Logger *slog.Logger
}

func (c PoolConfig) withDefaults() PoolConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.CallTimeout, 30*time.Second)
	def(&c.ConnectTimeout, 30*time.Second)
	def(&c.IdleTimeout, 5*time.Minute)
	def(&c.Backoff, time.Second)
	def(&c.MaxBackoff, 2*time.Minute)
	def(&c.AuthBackoff, 30*time.Second)
	def(&c.MaxAuthBackoff, 30*time.Minute)
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.MaxAuthBackoff < c.AuthBackoff {
		c.MaxAuthBackoff = c.AuthBackoff
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 2
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// abandonGrace is how long a call whose deadline passed may still take to
// return its own error before the Pool gives up on it and retires its
// controller.
const abandonGrace = 200 * time.Millisecond

// closeTimeout bounds closing a controller (a logout nobody waits for).
const closeTimeout = 10 * time.Second

// Pool owns the connections to BMCs: it caches one controller per host,
// opens it on first use, closes it when idle, when the host is forgotten or
// when its configuration changes, bounds every call by a deadline and the
// sessions open per BMC, and backs off per BMC after failures. It is safe
// for concurrent use. See the package documentation.
type Pool struct {
	cfg PoolConfig

	mu    sync.Mutex
	cond  *sync.Cond // signalled when an entry is released or closed
	hosts map[string]*entry
	// retiring: entries out of hosts whose call still runs; they count
	// against their BMC's sessions until it returns.
	retiring map[*entry]struct{}
	// configs: the Target.Config each host was last used with.
	configs map[string]string
	bmcs    map[string]*bmcState
	closed  bool
	// waiting: Close is waiting for wg; closes that start later (a call
	// that outlived its deadline ends after Close) are not added to it,
	// since a WaitGroup may not grow while it is waited for.
	waiting bool

	stop chan struct{}
	done chan struct{}
	wg   sync.WaitGroup // closes under way
}

// bmcState is one BMC's back-off and login serialisation.
type bmcState struct {
	logging      bool      // a Connect to this BMC runs
	failures     int       // failures in a row, authentication failures apart
	authFailures int       // authentication failures since the last success
	auth         bool      // the last failure was an authentication failure
	until        time.Time // no attempt before
	last         error     // the last failure
}

// entry is one host's cached controller.
type entry struct {
	host     string
	target   Target
	ctrl     Controller // nil until connected
	inUse    int
	lastUsed time.Time
	retired  bool // close once no call uses it
}

// NewPool returns a Pool; Close stops it.
func NewPool(cfg PoolConfig) *Pool {
	p := &Pool{cfg: cfg.withDefaults(), hosts: map[string]*entry{}, bmcs: map[string]*bmcState{}, retiring: map[*entry]struct{}{}, configs: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.janitor()
	return p
}

// Controller returns host's controller, reached as t says. Nothing is
// opened until the first call. The Controller's calls go through the Pool:
// bounded by CallTimeout, refused at once with ErrBackoff while the BMC
// backs off, and they connect (or reconnect) as needed.
func (p *Pool) Controller(host string, t Target) Controller {
	return &pooled{p: p, host: host, t: t}
}

// Forget closes host's controller (in the background, bounded) and drops
// it: call it when the host is gone. A later call through a Controller of
// host connects anew.
func (p *Pool) Forget(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.configs, host)
	if e, ok := p.hosts[host]; ok {
		p.retireLocked(e)
	}
}

// Close closes every controller (waiting up to 10 s for each BMC's
// logout) and stops the Pool. Later calls fail with ErrPoolClosed. A call
// still running past its deadline when Close is called (a controller that
// ignores its context) closes its controller in the background when it
// returns, after Close.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, e := range p.hosts {
		p.retireLocked(e)
	}
	p.waiting = true
	p.cond.Broadcast()
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.wg.Wait()
	return nil
}

// janitor closes idle controllers.
func (p *Pool) janitor() {
	defer close(p.done)
	period := min(p.cfg.IdleTimeout/4, time.Second)
	t := time.NewTicker(max(period, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.sweep()
		}
	}
}

// sweep closes the controllers idle for IdleTimeout.
func (p *Pool) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for _, e := range p.hosts {
		if e.ctrl != nil && e.inUse == 0 && now.Sub(e.lastUsed) >= p.cfg.IdleTimeout {
			p.retireLocked(e)
		}
	}
}

// retireLocked takes e out of use (p.mu held): out of p.hosts, its
// controller closed now, or once no call uses it.
func (p *Pool) retireLocked(e *entry) {
	if p.hosts[e.host] == e {
		delete(p.hosts, e.host)
	}
	e.retired = true
	if e.inUse > 0 {
		p.retiring[e] = struct{}{}
	} else if e.ctrl != nil {
		p.closeLocked(e)
	}
	p.cond.Broadcast()
}

// doneLocked is called when a use of e ends (p.mu held): a retired entry
// is closed once nothing uses it.
func (p *Pool) doneLocked(e *entry) {
	e.inUse--
	if e.retired && e.inUse == 0 {
		delete(p.retiring, e)
		p.closeLocked(e)
	}
	p.cond.Broadcast()
}

// closeLocked closes e's controller in the background.
func (p *Pool) closeLocked(e *entry) {
	c := e.ctrl
	e.ctrl = nil
	if c == nil {
		return
	}
	if p.cfg.Logger != nil {
		p.cfg.Logger.Info("closing BMC connection", "host", e.host, "bmc", e.target.BMC)
	}
	// Until the BMC has ended the session it still counts against the
	// BMC's bound.
	p.retiring[e] = struct{}{}
	counted := !p.waiting
	if counted {
		p.wg.Add(1)
	}
	go func() {
		if counted {
			defer p.wg.Done()
		}
		closeController(c)
		p.mu.Lock()
		delete(p.retiring, e)
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
}

func closeController(c Controller) {
	switch cl := c.(type) {
	case interface{ CloseContext(context.Context) error }:
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = cl.CloseContext(ctx)
	case interface{ Close() error }:
		done := make(chan struct{})
		go func() { _ = cl.Close(); close(done) }()
		t := time.NewTimer(closeTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
}

// bmc returns the state of BMC name (p.mu held).
func (p *Pool) bmc(name string) *bmcState {
	b, ok := p.bmcs[name]
	if !ok {
		b = &bmcState{}
		p.bmcs[name] = b
	}
	return b
}

// backoffErr returns the error of a call not tried (p.mu held), or nil.
func (p *Pool) backoffErr(op string, b *bmcState) error {
	now := p.cfg.Now()
	if b.last == nil || !now.Before(b.until) {
		return nil
	}
	class := ClassBusy
	if b.auth {
		class = ClassFailed
	}
	return &Error{Op: op, Class: class,
		Message: fmt.Sprintf("not tried: the BMC failed %d time(s) in a row, next try in %s", b.failures+b.authFailures, b.until.Sub(now).Round(time.Millisecond)),
		Err:     errors.Join(ErrBackoff, b.last)}
}

// failed records a failure of BMC b (p.mu held). Authentication failures
// and other failures each double their own pause; a failure never
// shortens a pause already running.
func (p *Pool) failed(bmcName string, b *bmcState, err error) {
	auth := errors.Is(err, ErrAuth)
	var d, limit time.Duration
	var n int
	if auth {
		b.authFailures++
		n, d, limit = b.authFailures, p.cfg.AuthBackoff, p.cfg.MaxAuthBackoff
	} else {
		b.failures++
		n, d, limit = b.failures, p.cfg.Backoff, p.cfg.MaxBackoff
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	b.auth, b.last = auth, err
	if until := p.cfg.Now().Add(d); until.After(b.until) {
		b.until = until
	}
	if p.cfg.Logger != nil {
		p.cfg.Logger.Warn("BMC backing off", "bmc", bmcName, "failures", b.failures+b.authFailures, "for", d, "error", err)
	}
}

// succeeded clears BMC b's back-off (p.mu held).
func (b *bmcState) succeeded() {
	b.failures, b.authFailures, b.auth, b.last, b.until = 0, 0, false, nil, time.Time{}
}

// countsAsFailure reports whether the outcome err of a call on an open
// controller says the BMC is unreachable or refuses us (so later calls
// should wait).
func countsAsFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return errors.Is(err, ErrAuth) || !answered(err)
}

// answered reports whether err is an answer of the BMC's (a status, or a
// refusal of the operation): the BMC is there.
func answered(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && (pe.Status != 0 || pe.Class == ClassUnsupported) && !errors.Is(err, ErrAuth)
}

// acquire returns host's entry with a connected controller, marked in use,
// connecting if needed. It honours ctx while it waits.
func (p *Pool) acquire(ctx context.Context, op, host string, t Target) (*entry, Controller, error) {
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, nil, ErrPoolClosed
		}
		b := p.bmc(t.BMC)
		if old, seen := p.configs[host]; seen && old != t.Config {
			b.succeeded() // new configuration (credentials): a prompt try
		}
		p.configs[host] = t.Config
		e, ok := p.hosts[host]
		if ok && e.target.Config != t.Config {
			p.retireLocked(e)
			ok = false
		}
		if err := p.backoffErr(op, b); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		if ok && e.ctrl != nil {
			e.inUse++
			e.lastUsed = p.cfg.Now()
			ctrl := e.ctrl
			p.mu.Unlock()
			return e, ctrl, nil
		}
		if ok && e.inUse > 0 {
			// Another caller is connecting this host: wait for it.
			if err := p.waitLocked(ctx, op, "waiting for the connection to this BMC"); err != nil {
				p.mu.Unlock()
				return nil, nil, err
			}
			continue
		}
		// A session slot: unless a logout on this BMC is under way already,
		// close its least recently used idle controller; then wait for the
		// BMC to end that session (or for any other to end).
		if p.sessionsLocked(t.BMC) >= p.cfg.MaxSessions {
			if !p.closingLocked(t.BMC) {
				p.evictLocked(t.BMC)
			}
			if err := p.waitLocked(ctx, op, "waiting for a free session on this BMC"); err != nil {
				p.mu.Unlock()
				return nil, nil, err
			}
			continue
		}
		// One login at a time per BMC.
		if b.logging {
			if err := p.waitLocked(ctx, op, "waiting for another login to this BMC"); err != nil {
				p.mu.Unlock()
				return nil, nil, err
			}
			continue
		}
		b.logging = true
		if !ok {
			e = &entry{host: host, target: t}
			p.hosts[host] = e
		}
		e.inUse++ // holds a session slot while connecting
		e.lastUsed = p.cfg.Now()
		p.mu.Unlock()
		return p.connect(ctx, op, e, b)
	}
}

// connect runs e's Target.Connect for the caller of acquire, who holds e
// (inUse) and BMC b's login. The caller waits until ctx is done (and
// abandonGrace more); a Connect that returns later is cleaned up then.
func (p *Pool) connect(ctx context.Context, op string, e *entry, b *bmcState) (*entry, Controller, error) {
	type result struct {
		ctrl Controller
		err  error
	}
	res := make(chan result, 1)
	abandoned := false // guarded by p.mu
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ConnectTimeout)
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(cctx, d) // the earlier of both
	}
	go func() {
		ctrl, err := e.target.Connect(cctx)
		cancel()
		if err != nil {
			if _, ok := err.(*Error); !ok {
				err = &Error{Op: "connect", Class: Classify(err), Err: err}
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		b.logging = false
		if err != nil {
			// Any failure to connect counts (a BMC that answers 503 to
			// every login must not get one a second).
			if !abandoned && !errors.Is(err, context.Canceled) {
				p.failed(e.target.BMC, b, err)
			}
			p.doneLocked(e)
			if e.inUse == 0 && e.ctrl == nil && p.hosts[e.host] == e {
				delete(p.hosts, e.host)
			}
			res <- result{nil, err}
			return
		}
		e.ctrl = ctrl
		e.lastUsed = p.cfg.Now()
		if abandoned || e.retired || p.closed {
			p.retireLocked(e)
			p.doneLocked(e)
			res <- result{nil, &Error{Op: op, Class: ClassBusy, Message: "the host was forgotten while connecting"}}
			return
		}
		p.cond.Broadcast()
		res <- result{ctrl, nil} // e.inUse stays counted: the caller's call
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		t := time.NewTimer(abandonGrace)
		select {
		case r = <-res:
		case <-t.C:
			p.mu.Lock()
			select {
			case r = <-res:
			default:
				abandoned = true
				err := &Error{Op: op, Class: ClassBusy, Message: "the BMC did not complete the login before the deadline", Err: context.DeadlineExceeded}
				p.failed(e.target.BMC, b, err)
				p.retireLocked(e)
				p.mu.Unlock()
				t.Stop()
				return nil, nil, err
			}
			p.mu.Unlock()
		}
		t.Stop()
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return e, r.ctrl, nil
}

// sessionsLocked counts the controllers of BMC name that are open or
// being opened, retired ones whose call still runs included.
func (p *Pool) sessionsLocked(name string) int {
	n := 0
	for _, e := range p.hosts {
		if e.target.BMC == name && (e.ctrl != nil || e.inUse > 0) {
			n++
		}
	}
	for e := range p.retiring {
		if e.target.BMC == name {
			n++
		}
	}
	return n
}

// closingLocked reports whether a controller of BMC name is being closed.
func (p *Pool) closingLocked(name string) bool {
	for e := range p.retiring {
		if e.target.BMC == name && e.inUse == 0 {
			return true
		}
	}
	return false
}

// evictLocked closes the least recently used idle controller of BMC name.
func (p *Pool) evictLocked(name string) bool {
	var victim *entry
	for _, e := range p.hosts {
		if e.target.BMC == name && e.ctrl != nil && e.inUse == 0 && (victim == nil || e.lastUsed.Before(victim.lastUsed)) {
			victim = e
		}
	}
	if victim == nil {
		return false
	}
	p.retireLocked(victim)
	return true
}

// waitLocked waits (p.mu held) until the Pool's state changes, or ctx is
// done.
func (p *Pool) waitLocked(ctx context.Context, op, why string) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	if ctx.Err() == nil {
		p.cond.Wait()
	}
	// stop must not run under p.mu: the AfterFunc may be waiting for it.
	p.mu.Unlock()
	stop()
	p.mu.Lock()
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Class: ClassBusy, Message: why, Err: err}
	}
	return nil
}

// release ends a call on e; err is its outcome (nil: success); abandoned
// says its caller gave up on it (its failure is counted already).
func (p *Pool) release(e *entry, err error, abandoned bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.lastUsed = p.cfg.Now()
	b := p.bmc(e.target.BMC)
	switch {
	case abandoned:
	case countsAsFailure(err):
		p.failed(e.target.BMC, b, err)
	case err == nil || answered(err):
		b.succeeded()
	}
	p.doneLocked(e)
}

// pooled is the Controller the Pool hands out.
type pooled struct {
	p    *Pool
	host string
	t    Target
}

func (c *pooled) call(ctx context.Context, op string, f func(context.Context, Controller) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.p.cfg.CallTimeout)
	defer cancel()
	e, ctrl, err := c.p.acquire(ctx, op, c.host, c.t)
	if err != nil {
		return err
	}
	res := make(chan error, 1)
	abandoned := false // guarded by c.p.mu
	go func() {
		err := f(ctx, ctrl)
		c.p.mu.Lock()
		ab := abandoned
		c.p.mu.Unlock()
		c.p.release(e, err, ab)
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
	}
	// The controller does not honour its deadline: give up on it. It is
	// closed once the call returns, and counts against the BMC's sessions
	// until then.
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case err := <-res:
		return err
	default:
	}
	abandoned = true
	err = &Error{Op: op, Class: ClassBusy, Message: "the BMC did not answer before the deadline", Err: context.DeadlineExceeded}
	p.failed(e.target.BMC, p.bmc(e.target.BMC), err)
	p.retireLocked(e)
	return err
}

// State reads the host's power state through the pool.
func (c *pooled) State(ctx context.Context) (State, error) {
	var s State
	err := c.call(ctx, "state", func(ctx context.Context, ctrl Controller) error {
		var err error
		s, err = ctrl.State(ctx)
		return err
	})
	if err != nil {
		return StateUnknown, err
	}
	return s, nil
}

// On powers the host on through the pool.
func (c *pooled) On(ctx context.Context) error {
	return c.call(ctx, "on", func(ctx context.Context, ctrl Controller) error { return ctrl.On(ctx) })
}

// Off powers the host off through the pool.
func (c *pooled) Off(ctx context.Context, m Mode) error {
	return c.call(ctx, OpName(m), func(ctx context.Context, ctrl Controller) error { return ctrl.Off(ctx, m) })
}
