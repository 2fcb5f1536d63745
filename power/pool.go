package power

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrBackoff is matched (errors.Is) by the error of a login the Pool did
// not try because logins with these credentials to this BMC are backing
// off after a failure. The same error also matches the failure that
// started the back-off (ErrAuth, for example). It is also matched, with
// ErrNotSent, by a read not sent on a session whose calls send the
// credentials while the BMC leaves them unanswered (package doc).
var ErrBackoff = errors.New("power: not tried, logins to the BMC with these credentials are backing off after a failure")

// ErrNotSent is matched (errors.Is) by the error of a Pool call that was
// never sent to the BMC: the Pool had no session for it (its login
// failed, was backing off, was still running when the caller's context
// ended, or no session slot was free), and by an adapter's own refusal
// before sending (power/redfish: a PushPowerButton it holds back, a
// state it needs and could not read, or a command whose context ended
// before it went out; power/ipmi: a soft shutdown on a
// state it could not read, a session it could not open). A power
// command whose error matches ErrNotSent certainly changed nothing; any
// other error of a power command may have been carried out.
var ErrNotSent = errors.New("power: not sent to the BMC")

// ErrPoolClosed is returned by calls on a closed Pool.
var ErrPoolClosed = errors.New("power: pool closed")

// Target says how to reach the power controller of one host.
type Target struct {
	// BMC names the BMC endpoint the host is behind (its URL or
	// host:port). Logins are one at a time per BMC, and the session bound
	// is per BMC: hosts behind one BMC (blades, multi-node chassis) share
	// them.
	BMC string
	// Config identifies the configuration Connect uses for this host (for
	// example the address, the system, the credentials' version and the
	// TLS settings). It must stay the same while the configuration does:
	// when it changes, the host's cached controller is dropped.
	Config string
	// Login identifies the login Connect makes: the credentials (their
	// source and version, never the secret) and the TLS settings. Hosts
	// with the same BMC and Login share the back-off of their logins and,
	// when the adapter can (SessionSharer: power/redfish), one session.
	// Empty: Config is the login's identity. Never give two hosts whose
	// credentials differ the same Login: one's wrong password would back
	// off the other's logins (the adapters never cross credentials, but
	// the back-off is the Pool's).
	Login string
	// Connect opens the controller (a login: a Redfish session or an IPMI
	// session). The Pool calls it with a deadline (PoolConfig.ConnectTimeout)
	// that the caller's cancellation does not shorten, its login at most
	// one at a time per BMC (until it calls ConnectInfo.LoggedIn, or
	// returns), and with a ConnectInfo in its context (ConnectInfoFrom). The controller it returns should implement
	// Close() error or CloseContext(context.Context) error.
	Connect func(ctx context.Context) (Controller, error)
}

// loginKey is the identity of t's login within its BMC.
func (t Target) loginKey() string {
	if t.Login != "" {
		return "login\x00" + t.Login
	}
	return "config\x00" + t.Config
}

// PoolConfig tunes a Pool. Zero fields take the defaults given.
type PoolConfig struct {
	// CallTimeout bounds every State, On and Off call (default 30 s); the
	// caller's own deadline applies as well.
	CallTimeout time.Duration
	// ConnectTimeout bounds every Target.Connect (default 30 s).
	ConnectTimeout time.Duration
	// IdleTimeout: a session no call used this long is closed (default
	// 5 min).
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions open at once per BMC (default 2).
	// Hosts whose sessions are shared (the same BMC and Login, an adapter
	// that shares) count once. A login of credentials not yet proven on
	// the BMC may take one more, briefly: it is tried before any working
	// session is closed for it (see the package documentation); so may a
	// login while a kept session retired for a power command's login
	// stays logged in for a host's join, never cut short (until that join
	// and the call it serves end). Logins that open no session on the
	// BMC (ConnectInfo.NoSession: power/redfish with BasicAuth) are not
	// counted.
	MaxSessions int
	// LoginInterval: a login that needs a live, idle session of its BMC
	// closed (the BMC is at MaxSessions) closes at most one every
	// LoginInterval (default 1 min); other such logins fail as busy
	// (waiting only for a session being logged out, or a login a slot is
	// held for). A power command's login (On, Off, Reset) may close a
	// second one in the same LoginInterval, a place reads never take:
	// logins for State and for commands together close at most two live
	// sessions per BMC per LoginInterval, a read's only the first (two
	// hosts fenced together both go out at once; a third command within
	// the interval fails as busy). An idle session that serves no
	// host (a kept one) is closed first, at any time, and is not counted
	// (while a host joins it, the login waits for it rather than close a
	// session that serves hosts, for a short while: see the package
	// documentation). A host whose system failed on its last two tries
	// or more (missing or failing) closes no session: it retries at its
	// own back-off and, for all such hosts, at most once per
	// LoginInterval per BMC; at the bound, one over it. The slot an
	// eviction frees is held for the login that made it, which goes on if
	// its caller gives up.
	LoginInterval time.Duration
	// Backoff is the first pause after a failed login that is not an
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
	// Logger, if set, gets a line when logins start backing off and when
	// a session is closed.
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
	def(&c.LoginInterval, time.Minute)
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
// session.
const abandonGrace = 200 * time.Millisecond

// closeTimeout bounds closing a controller (a logout nobody waits for).
const closeTimeout = 10 * time.Second

// Pool owns the connections to BMCs: it keeps one session per BMC and
// login (shared by the hosts it serves when the adapter can), opens it on
// first use, closes it when idle, when no host uses it any more or when
// the hosts' configuration changes, bounds every call by a deadline and
// the sessions open per BMC, and backs off logins per BMC and credentials
// after failures. Every operation costs the same whatever the number of
// hosts. It is safe for concurrent use. See the package documentation.
type Pool struct {
	cfg PoolConfig

	mu    sync.Mutex
	hosts map[string]*entry
	eps   map[string]*endpoint
	// hostsHigh, epsHigh: the most entries the maps held since they were
	// last made (Go's maps never shrink: they are copied when mostly
	// empty, so that memory follows the fleet down after churn).
	hostsHigh, epsHigh int
	idle               idleList // sessions with no call running, least recently used first
	// parked: logins no host uses whose back-off still runs (a host
	// forgotten and back at once must not log in again sooner), the
	// soonest over first.
	parked parkedHeap
	// closed: Close was called; waiting: Close is waiting for the calls
	// and counted closes under way (closes that start later are not
	// counted, but those of calls it waits for).
	closed, waiting bool
	// calls: calls running on a session and not given up on (past their
	// deadline); counted: closes under way that Close waits for; drained
	// is closed (and dropped) when either drops.
	calls, counted int
	drained        chan struct{}
	// joinedRetired: sessions retired while a host joined them and no
	// call used them, still logged in until the join ends (Close logs
	// them out at once).
	joinedRetired map[*session]struct{}
	stop, done    chan struct{}
	checks        sync.WaitGroup // the checks of credentials running (Pool.check): Close waits for them
	seq           uint64         // logins made (session.seq)
	readyQ        []*endpoint    // BMCs whose closes wait for a closer
	closers       int            // goroutines closing sessions
}

// endpoint is one BMC's state.
type endpoint struct {
	name      string
	logging   bool                  // a login to this BMC runs
	sessions  int                   // sessions being opened, open or being closed
	live      map[*session]struct{} // open and not retired (at most MaxSessions, one more briefly as PoolConfig.MaxSessions says)
	nlive     int                   // len(live), read without touching the map (trimLocked at every call's end)
	lastEvict time.Time             // when a login last closed a live session
	// evicts: when a read's or a power command's login last closed a
	// live session (evictLocked), the latest first: reads and commands
	// together close two per LoginInterval, reads only the first (past
	// it, a host's fence may still close one: entry.cmdEvict).
	evicts [2]time.Time
	// cmdEvict: when a power command's login last closed a live session.
	cmdEvict  time.Time
	lastProbe time.Time         // when a host whose system failed last retried (its turn: pool_turn.go)
	retry     turnQueue         // hosts whose system failed waiting for that turn
	reserved  int               // slots freed by evictions, held for the logins that evicted
	outgoing  int               // its sessions retired while joined, not closed yet (session.outgoing)
	creds     map[string]*creds // by Target.loginKey
	wake      chan struct{}     // closed (and dropped) when the state changes
	closeQ    []closeJob        // its sessions to close, in order
	closing   bool              // a goroutine closes closeQ
	ready     bool              // in Pool.readyQ
}

// creds is one login (BMC and credentials): its back-off and its shared
// session.
type creds struct {
	key          string
	ep           *endpoint
	refs         int      // hosts using this login
	pins         int      // its sessions (from login to logout) and logins running
	connecting   int      // its logins running (Target.Connect not returned yet)
	shared       *session // the session hosts of this login share, if any
	failures     int      // failed logins in a row, authentication failures apart
	authFailures int      // authentication failures since the last success
	auth         bool     // the last failure was an authentication failure
	// checksRefused: refused checks of a refusal (CallInfo.Check) not
	// counted yet; the next authentication failure counts them.
	checksRefused int
	// confirmed: a check refused the credentials since their last
	// success (their refusal is theirs, not one system's: a retry after
	// it is not checked again until their back-off ends). checksDone:
	// the checks done (Pool.check); checksStarted: those started;
	// checking: the one running, if any; checkLast: the last one done.
	confirmed     bool
	checksDone    uint64
	checksStarted uint64
	checking      *checkRun
	checkLast     *checkRun
	proven        bool // a login with these credentials succeeded here, and none was refused since
	until         time.Time
	last          error
	answeredAt    time.Time // when the BMC last answered a request of these credentials (a login, a call)
	// loginsOK and loginsFailed count the outcomes of logins with these
	// credentials (with basic auth, every answered call is one): a call
	// refused with ErrAuth backs them off only if no login failed during
	// it and, on a session with a token, none succeeded (release).
	loginsOK     uint64
	loginsFailed uint64
	// unansweredAt: when a call that sent these credentials
	// (CallAuthenticator) last ran out of time unanswered; heldUntil and
	// heldProbes: the reads held since (heldReadLocked): none sent before
	// heldUntil, and how many were sent, unanswered, since the last
	// answer; held: the hosts whose held reads wait for their turn.
	unansweredAt time.Time
	heldUntil    time.Time
	heldProbes   int
	held         turnQueue
	// roundUntil: the pause of the last held read sent beside the turn,
	// for a host that waited a whole round (heldReadLocked).
	roundUntil time.Time
	parkedAt   int // its index in Pool.parked, plus one (0: not parked)
}

// session is one login's controller (a session at the BMC) and the hosts
// it serves.
type session struct {
	cr        *creds
	ctrl      Controller
	shareable bool
	authCalls bool   // its calls send the credentials (CallAuthenticator)
	seq       uint64 // the order of its login among the Pool's
	entries   map[*entry]struct{}
	inUse     int // calls running on it
	joins     int // hosts joining it (not a use: it stays idle, and is logged out once they are done, or on Close)
	lastUsed  time.Time
	idle      idleLink // its place on Pool.idle
	retired   bool
	early     bool // shared before its login's Connect returned, which it has not yet (pool_join.go)
	uncounted bool // its login opened no session on the BMC: in neither endpoint.sessions nor live
	// outgoing: retired while a host joined it, and not closed yet: it
	// stays logged in for the join (bounded by the joiner's own
	// ConnectTimeout) and the call the join serves (endpoint.outgoing).
	outgoing bool
}

// entry is one host.
type entry struct {
	host       string
	target     Target
	cr         *creds
	sess       *session   // nil until connected
	ctrl       Controller // this host's controller on sess
	connecting bool       // a Connect for this host runs
	noShare    bool       // the adapter declined the shared session
	gone       bool       // dropped from p.hosts (forgotten or replaced)
	// The host's own Connect failures (ErrNoSystem, ErrAfterLogin: its
	// system is not on the BMC, or failed after the login) back off this
	// host alone, not its login: fails in a row, the last one, and until
	// when calls are not tried.
	ownFails int
	ownLast  error
	ownUntil time.Time
	// fenced: a power command went through this host's own back-off
	// window (fenceTriedLocked); the next one waits for it to end.
	// fenceGen counts the passes taken, so that a call gives back its
	// own only (fenceHold).
	fenced   bool
	fenceGen uint64
	// unanswered: this host's last call on its session sent the
	// credentials (CallAuthenticator) and ran out of time unanswered;
	// calledAt: when that call ended.
	unanswered bool
	calledAt   time.Time
	// missing: the last missingAfter tries or more failed after the BMC
	// accepted the login (hostsOwn: its system not found, or failing).
	missing bool
	// Its turns (pool_turn.go): the retry of a host whose system failed
	// (endpoint.retry), and the read of a host held on credentials the
	// BMC leaves unanswered (creds.held, heldReadLocked).
	retry, held turn
	// cmdEvict: when a power command of this host last closed a live
	// session (evictLocked: past the commands' budget, a host whose
	// commands closed none in two LoginIntervals still closes one).
	cmdEvict time.Time
	// sessionless: this host's last login opened no session on the BMC
	// (its adapter said so: ConnectInfo.NoSession); its next ones take no
	// slot. Per host, not per login: hosts of one Login may connect in
	// other modes (basic auth, sessions).
	sessionless bool
}

// NewPool returns a Pool; Close stops it.
func NewPool(cfg PoolConfig) *Pool {
	p := &Pool{cfg: cfg.withDefaults(), hosts: map[string]*entry{}, eps: map[string]*endpoint{},
		joinedRetired: map[*session]struct{}{},
		stop:          make(chan struct{}), done: make(chan struct{})}
	go p.janitor()
	return p
}

// Controller returns host's controller, reached as t says. Nothing is
// opened until the first call. The Controller's calls go through the Pool:
// bounded by CallTimeout, and they log in (or reuse a session) as needed;
// a login refused for back-off fails at once with ErrBackoff. It has the
// method TogglesOff (reboot.Toggler) of its adapter once connected, and
// answers true, a possible press of the power button, before; and it is a
// Resetter and a CheckedOner, whose Reset and OnChecked are the adapter's
// (ErrUnsupported if it has none).
func (p *Pool) Controller(host string, t Target) Controller {
	return &pooled{p: p, host: host, t: t}
}

// Forget drops host: its session is closed (in the background, bounded)
// unless other hosts use it, and what the Pool kept for it goes (the
// back-off of a login no other host uses once it is over: a host forgotten
// and back at once does not log in sooner). Call it when the host is
// deleted, no longer managed here, or its BMC or credentials changed. A
// later call through a Controller of host starts anew.
func (p *Pool) Forget(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.hosts[host]; ok {
		delete(p.hosts, host)
		p.detachLocked(e)
		p.hosts, p.hostsHigh = shrink(p.hosts, p.hostsHigh)
	}
}

// shrink returns m, or a copy of it if it holds less than a quarter of
// its high-water mark high (amortised O(1) per delete), and the new mark.
func shrink[V any](m map[string]V, high int) (map[string]V, int) {
	high = max(high, len(m))
	if high < 1024 || len(m) > high/4 {
		return m, high
	}
	c := make(map[string]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c, len(m)
}

// Close logs every session out and stops the Pool. Later calls fail with
// ErrPoolClosed. It waits for the calls running on a session to end, each
// at most until its deadline (CallTimeout, or the caller's) and a
// moment's grace, and then for the logouts, at most 10 s in all, however
// many BMCs hang: the logouts run up to maxClosingClosers BMCs at once
// (each BMC's in order), and those still unanswered or queued when Close
// returns go on in the background (or are left to the BMCs' session
// timeouts when the process exits). A call still running past its
// deadline (a controller that ignores its context), or a login still
// running, closes its session in the background when it returns, after
// Close.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for h, e := range p.hosts {
		delete(p.hosts, h)
		p.detachLocked(e)
	}
	for _, ep := range p.eps {
		for s := range ep.live {
			p.retireLocked(s) // closed now unless a call uses it, even while joined
		}
		p.wakeLocked(ep)
	}
	for s := range p.joinedRetired { // retired earlier while joined
		if s.inUse == 0 {
			p.closeLocked(s)
		}
	}
	p.waiting = true
	for p.closers < maxClosingClosers { // more BMCs' logouts at once now
		ep := p.nextReadyLocked()
		if ep == nil {
			break
		}
		p.startCloserLocked(ep)
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.checks.Wait() // ended by p.stop (Pool.check)
	p.mu.Lock()
	defer p.mu.Unlock()
	// Bounded: a call is given up on past its deadline (pooled.call), and
	// the logouts are waited for closeTimeout at most, once no call runs.
	var deadline <-chan time.Time
	for p.calls > 0 || p.counted > 0 {
		if p.calls == 0 && deadline == nil {
			t := time.NewTimer(closeTimeout + abandonGrace)
			defer t.Stop()
			deadline = t.C
		}
		ch := make(chan struct{})
		p.drained = ch
		p.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			p.mu.Lock()
			return nil
		}
		p.mu.Lock()
	}
	return nil
}

// drainedLocked wakes Close if it waits (p.mu held).
func (p *Pool) drainedLocked() {
	if p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// janitor closes idle sessions.
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

// sweep closes the sessions idle for IdleTimeout: the oldest first, and
// only those (the idle list is in order of last use); and drops the
// parked logins whose back-off is over.
func (p *Pool) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for s := p.idle.Front(); s != nil; {
		next := s.idle.next
		if now.Sub(s.lastUsed) < p.cfg.IdleTimeout {
			break
		}
		if s.joins == 0 { // a session being joined is closed after the join
			p.retireLocked(s)
		}
		s = next
	}
	// The soonest over first, and only those: no scan of the others.
	for n := len(p.parked); n > 0 && len(p.parked) > 0 && !now.Before(p.parked[0].until); n-- {
		p.gcLocked(p.parked[0]) // its back-off is over: dropped
	}
}
