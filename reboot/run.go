package reboot

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Loop is one reconciler as a Runner runs it: the reboot Reconciler
// (Reconciler.Loop), the remediation one (remediation.Reconciler.Loop),
// or one of your own.
type Loop struct {
	// Name names the loop in the Runner's log lines ("reboot").
	Name string
	// Reconcile runs one pass for key.
	Reconcile func(ctx context.Context, key string) (Next, error)
	// Keys lists every key to reconcile (your host or machine names). The
	// Runner calls it at start and every Runner.Resync, reconciles each
	// key listed, and forgets a key no longer listed (its entry, its
	// retries and its watch end; a pass running for it ends first) at the
	// first Resync tick after a listing without it, unless work is under
	// way for it: a key is kept (and reconciled as usual), whatever is due
	// for it, while the last pass that ended for it reported Next.Busy,
	// until one reports it not busy (see Next.Busy and Next.Idle for the
	// passes that fail; a key counts as busy until its first pass ends). A
	// listing that fails forgets no key; while a listing is still
	// running, no key is forgotten and the loop
	// is not listed again. A listing that
	// fails is logged and tried again after a back-off, from MinBackoff
	// doubling up to MaxListRetry (or Resync if shorter), until one
	// succeeds: a store that does not answer as the process starts delays
	// its keys by about as long as it does not answer, not by a Resync.
	// nil: only the keys given to Runner.Add, each reconciled again at
	// every Runner.Resync until a pass reports its object gone
	// (Next.Release) or Runner.Remove drops it: the Runner then forgets
	// it (its entry and its watch) until it is added again, as a work
	// queue forgets a deleted object.
	Keys func(ctx context.Context) ([]string, error)
	// Watch, if set, returns a channel that receives a value whenever key
	// changes (HostWatcher.Watch has this shape), closed when ctx is done.
	// The Runner watches every key it knows and reconciles it at once on
	// each value; without Watch, changes are seen at the next RequeueAfter
	// or Resync.
	Watch func(ctx context.Context, key string) (<-chan struct{}, error)
}

// Next is when a Loop's pass wants the next one.
type Next struct {
	// Requeue asks for another pass soon: after the key's back-off
	// (Runner.MinBackoff, doubling up to MaxBackoff while passes keep
	// asking or failing).
	Requeue bool
	// After, if positive (and Requeue false), asks for the next pass after
	// it, and resets the key's back-off.
	After time.Duration
	// Release reports the key's object gone (ErrNotFound) with nothing
	// left to do for it: the Runner forgets the key (its entry and its
	// watch end) until it is listed or added again, unless a wake-up came
	// while the pass ran (the key then runs again). Requeue and After are
	// ignored when it is set.
	Release bool
	// Busy reports work under way for the key (a reboot in progress, a
	// host held off or powered off by this controller and not yet known
	// on again, a request pending, a call whose answer may still land, a
	// remediation in flight), or that the pass could not tell (it failed
	// before it read the key's object: unknown counts as busy): the
	// Runner keeps the key, and reconciles it, even when its listing
	// (Loop.Keys) no longer holds it, until a pass reports it not busy.
	// A pass that succeeds without Busy reports it not busy; so does one
	// that fails with Idle. A pass that fails with neither leaves the key
	// as busy as the pass before it said (a key whose first pass so fails
	// counts as not busy: a Loop that never sets Busy has its unlisted
	// keys forgotten). Leave it false for a key with nothing of the
	// controller's own to finish (an idle host, even one whose BMC does
	// not answer): dropped from the listing, it is forgotten at the next
	// Resync tick.
	Busy bool
	// Idle, with Busy false, reports that a pass that failed read the
	// key's object and found no work under way (an idle host whose power
	// controller cannot be had): the key counts as not busy. It is
	// ignored when the pass succeeds (Busy alone then says).
	Idle bool
}

// Runner runs Loops: the work queue a controller outside Kubernetes needs
// around reboot.Reconciler and remediation.Reconciler. It gives the same
// guarantees as a controller-runtime controller:
//
//   - A key is never reconciled twice at once (per loop): a key woken while
//     its pass runs is reconciled once more right after it.
//   - At most Workers passes run at once, over all loops.
//   - A pass that fails (any error: a conflict, a store or BMC error,
//     reboot.ErrNotLeader) or asks to Requeue runs again after the key's
//     back-off, which doubles from MinBackoff to MaxBackoff and is reset by
//     a pass that succeeds without Requeue; a conflict is retried the same
//     way (the next pass reads again and decides again). A pass refused
//     for leadership (reboot.ErrNotLeader) runs again after at most
//     StandbyRetry: nothing tells a standby when it wins the leadership,
//     and a request that came during a failover must not wait MaxBackoff
//     after it (only its first refusal in a row is logged).
//   - Next.After schedules the next pass; a wake-up from Loop.Watch, Add or
//     Resync brings it forward, never later.
//   - Every pass is bounded by PassTimeout; when ctx is done, Run stops
//     starting passes, cancels those running, waits for them, and returns.
//
// A Runner is not a leader election: run one per process and fence the
// reconcilers with a Guard (etcd.Leadership.Guard) when several processes
// may run.
type Runner struct {
	// Loops are the reconcilers to run.
	Loops []Loop
	// Workers bounds the passes that run at once (default 4).
	Workers int
	// Resync is how often Loop.Keys is listed again and every key
	// reconciled, a listed one when its listing comes in, one given to
	// Add to a loop without Keys at the tick (default 10 min).
	Resync time.Duration
	// MinBackoff and MaxBackoff bound the back-off after failures and
	// Requeue (defaults 100 ms and 2 min).
	MinBackoff, MaxBackoff time.Duration
	// PassTimeout bounds one pass (default 2 min).
	PassTimeout time.Duration
	// StandbyRetry bounds the back-off of a key whose pass was refused
	// for leadership (an error wrapping reboot.ErrNotLeader) (default
	// 5 s): a standby acts on it within about that once it leads.
	StandbyRetry time.Duration
	// Logger, if set, gets a line per failed pass and per failed listing
	// or watch.
	Logger *slog.Logger

	once     sync.Once
	pending  chan runReq
	stopped  chan struct{} // closed when Run returns
	stopOnce sync.Once
}

// ErrRunnerStopped is returned by Runner.Add once Run has returned:
// nothing takes its wake-ups any more.
var ErrRunnerStopped = errors.New("reboot: runner stopped")

// MaxListRetry caps the back-off between tries of a Loop.Keys listing that
// fails (it starts at Runner.MinBackoff and doubles): well below
// DefaultResync, so that keys not yet listed because the store did not
// answer wait about a minute at most once it answers again.
const MaxListRetry = time.Minute

// Runner defaults.
const (
	DefaultWorkers      = 4
	DefaultResync       = 10 * time.Minute
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 2 * time.Minute
	DefaultPassTimeout  = 2 * time.Minute
	DefaultStandbyRetry = 5 * time.Second
)

// firstWatchWait bounds how long a new key's first pass waits for the
// first try of its watch.
const firstWatchWait = time.Second

type runKey struct {
	loop int
	key  string
}

// runReq is a call of Add (or of Remove, remove set) for Run to take.
type runReq struct {
	k      runKey
	remove bool
}

// keyState is what the Runner knows of one key.
type keyState struct {
	k        runKey
	due      time.Time // when scheduled (heap != -1)
	index    int       // heap index, -1 when not scheduled
	running  bool
	again    bool // woken while running: run again right after
	failures int
	stop     context.CancelFunc // ends the key's watch
	listed   bool               // seen in the latest listing (or added)
	release  bool               // removed while running: forgotten when the pass ends
	busy     bool               // the last pass that could tell reported Next.Busy (true until a pass ends)
	ended    bool               // a pass of the key has ended
	unlisted bool               // not listed at a tick while running: forgotten when the pass ends unless busy
}

type dueHeap []*keyState

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *dueHeap) Push(x any)        { s := x.(*keyState); s.index = len(*h); *h = append(*h, s) }
func (h *dueHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	s.index = -1
	return s
}

type runResult struct {
	k    runKey
	next Next
	err  error
}

// Add wakes key of the loop named loop (reconciled at once, and watched
// from now on; a key new to a loop with a Watch is reconciled as soon as
// its watch is in place, and within a second whatever the watch does). It
// may be called before or while Run runs; it blocks only while 1024
// wake-ups wait for Run to take them. Once Run has returned, Add never
// blocks: it returns an error wrapping ErrRunnerStopped.
func (r *Runner) Add(loop, key string) error {
	return r.request(loop, key, false)
}

// Remove drops key from the loop named loop: the Runner forgets it (its
// entry and its watch end; a pass running for it ends first) until it is
// listed or added again. Use it for a key given to Add whose object you
// know is gone (a server decommissioned); a pass that finds the object
// gone releases its key itself (Next.Release). It blocks and fails as Add
// does.
func (r *Runner) Remove(loop, key string) error {
	return r.request(loop, key, true)
}

func (r *Runner) request(loop, key string, remove bool) error {
	verb, prep := "add", "to"
	if remove {
		verb, prep = "remove", "from"
	}
	for i, l := range r.Loops {
		if l.Name == loop {
			r.init()
			select {
			case <-r.stopped:
				return fmt.Errorf("reboot: runner: %s %q %s loop %q: %w", verb, key, prep, loop, ErrRunnerStopped)
			default:
			}
			select {
			case r.pending <- runReq{runKey{i, key}, remove}:
				return nil
			case <-r.stopped:
				return fmt.Errorf("reboot: runner: %s %q %s loop %q: %w", verb, key, prep, loop, ErrRunnerStopped)
			}
		}
	}
	return fmt.Errorf("reboot: runner has no loop %q", loop)
}

func (r *Runner) init() {
	r.once.Do(func() {
		r.pending = make(chan runReq, 1024)
		r.stopped = make(chan struct{})
	})
}

// listBackoff is the wait before the next try of a listing that failed
// failures times in a row: from MinBackoff, doubling, up to the smallest
// of MaxListRetry, MaxBackoff and resync.
func (r *Runner) listBackoff(failures int, resync time.Duration) time.Duration {
	lo := r.MinBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	hi := min(MaxListRetry, resync)
	if r.MaxBackoff > 0 {
		hi = min(hi, r.MaxBackoff)
	}
	d := min(lo, hi)
	for i := 1; i < failures && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

func (r *Runner) backoff(failures int) time.Duration {
	lo, hi := r.MinBackoff, r.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	d := lo
	for i := 1; i < failures && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Run runs the loops until ctx is done, then returns ctx's error once
// every pass it started has ended. Call it once per Runner.
func (r *Runner) Run(ctx context.Context) error {
	if len(r.Loops) == 0 {
		return errors.New("reboot: runner without loops")
	}
	r.init()
	defer r.stopOnce.Do(func() { close(r.stopped) })
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	resync := r.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	timeout := r.PassTimeout
	if timeout <= 0 {
		timeout = DefaultPassTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	work := make(chan runKey)
	results := make(chan runResult, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				pctx, pcancel := context.WithTimeout(ctx, timeout)
				next, err := r.Loops[k.loop].Reconcile(pctx, k.key)
				pcancel()
				results <- runResult{k, next, err}
			}
		}()
	}
	type listing struct {
		loop int
		keys []runKey
		err  error
	}
	listed := make(chan listing, len(r.Loops))
	// A loop whose latest listing failed forgets none of its keys: a
	// failed listing is not "no longer listed".
	listFailed := make([]bool, len(r.Loops))
	// A loop whose listing is still running (an inventory slow for a
	// moment, longer than Resync) forgets none of its keys either, and is
	// not listed again until that listing is in: a key it lists is not
	// "no longer listed", and slow listings do not pile up.
	listRunning := make([]bool, len(r.Loops))
	// A loop whose listing failed is listed again at relistAt (zero: no
	// retry due), after a back-off counted by listFailures: a Resync
	// (10 min) is too long to wait for keys nobody knows yet.
	listFailures := make([]int, len(r.Loops))
	relistAt := make([]time.Time, len(r.Loops))
	wakes := make(chan runKey, 256)
	listOne := func(i int) {
		l := r.Loops[i]
		if l.Keys == nil || listRunning[i] {
			return
		}
		listRunning[i] = true
		relistAt[i] = time.Time{}
		go func() {
			lctx, lcancel := context.WithTimeout(ctx, timeout)
			defer lcancel()
			keys, err := l.Keys(lctx)
			ks := make([]runKey, len(keys))
			for j, k := range keys {
				ks[j] = runKey{i, k}
			}
			select {
			case listed <- listing{i, ks, err}:
			case <-ctx.Done():
			}
		}()
	}
	list := func() {
		for i := range r.Loops {
			listOne(i)
		}
	}
	keys := map[runKey]*keyState{}
	var due dueHeap
	schedule := func(s *keyState, at time.Time) {
		switch {
		case s.running:
			if !at.After(time.Now()) {
				s.again = true
			} else if s.index < 0 || at.Before(s.due) {
				// Kept in the heap; dispatch waits until it is done.
				s.due = at
				if s.index < 0 {
					heap.Push(&due, s)
				} else {
					heap.Fix(&due, s.index)
				}
			}
		case s.index < 0:
			s.due = at
			heap.Push(&due, s)
		case at.Before(s.due):
			s.due = at
			heap.Fix(&due, s.index)
		}
	}
	// wake reconciles k now, unless k is new and has a watch: its first
	// pass then waits for the watch to be set up (the watch wakes it),
	// so that no change made between that pass's read and the watch's
	// start is missed; but no longer than firstWatchWait (a watch that
	// does not return: an informer that never syncs).
	// release forgets s: its watch ends, it leaves the heap and the map.
	// A key that runs is released when its pass ends (s.release).
	release := func(s *keyState) {
		if s.running {
			s.release, s.again = true, false
			return
		}
		if s.stop != nil {
			s.stop()
		}
		if s.index >= 0 {
			heap.Remove(&due, s.index)
		}
		delete(keys, s.k)
	}
	wake := func(k runKey) {
		s := keys[k]
		if s == nil {
			s = &keyState{k: k, index: -1, busy: true}
			keys[k] = s
			if w := r.Loops[k.loop].Watch; w != nil {
				wctx, wcancel := context.WithCancel(ctx)
				s.stop = wcancel
				s.listed = true
				go r.watch(wctx, w, k, wakes)
				schedule(s, time.Now().Add(firstWatchWait))
				return
			}
		}
		s.listed = true
		s.release, s.unlisted = false, false
		schedule(s, time.Now())
	}

	list()
	tick := time.NewTicker(resync)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	free := workers
	for {
		// Start what is due, skipping keys that run (they are started
		// again when their pass ends).
		now := time.Now()
		for free > 0 && due.Len() > 0 && !due[0].due.After(now) {
			s := heap.Pop(&due).(*keyState)
			if s.running {
				s.again = true // due now: runs right after its pass
				continue
			}
			s.running = true
			free--
			work <- s.k
		}
		wait := time.Hour
		if due.Len() > 0 && free > 0 {
			wait = max(0, time.Until(due[0].due))
		}
		for i, at := range relistAt {
			if at.IsZero() {
				continue
			}
			if !at.After(now) {
				listOne(i)
				continue
			}
			wait = min(wait, time.Until(at))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			close(work)
			wg.Wait() // results has room for every pass still running
			for _, s := range keys {
				if s.stop != nil {
					s.stop()
				}
			}
			return ctx.Err()
		case res := <-results:
			free++
			s := keys[res.k]
			s.running = false
			switch {
			case res.err == nil || res.next.Busy || res.next.Idle:
				s.busy = res.next.Busy
			case !s.ended:
				// Its first pass failed and says nothing: a Loop that
				// does not report Busy.
				s.busy = false
			}
			s.ended = true
			unlisted := s.unlisted
			s.unlisted = false
			switch {
			case s.release:
				release(s)
			case res.err == nil && res.next.Release && !s.again:
				release(s)
			case unlisted && !s.busy && !s.again:
				// Not listed at the last tick, and nothing under way:
				// forgotten now that its pass has ended (a wake-up that
				// came meanwhile runs it once more first).
				release(s)
			default:
				if res.err == nil && res.next.Release {
					res.next = Next{}
				}
				r.done(ctx, s, res, schedule)
				if s.again {
					s.again = false
					schedule(s, time.Now())
				}
			}
		case req := <-r.pending:
			if !req.remove {
				wake(req.k)
			} else if s := keys[req.k]; s != nil {
				release(s)
			}
		case k := <-wakes:
			if s := keys[k]; s != nil {
				schedule(s, time.Now())
			}
		case l := <-listed:
			listRunning[l.loop] = false
			listFailed[l.loop] = l.err != nil
			if l.err != nil {
				listFailures[l.loop]++
				d := r.listBackoff(listFailures[l.loop], resync)
				relistAt[l.loop] = time.Now().Add(d)
				r.warn(ctx, r.Loops[l.loop].Name, "", fmt.Sprintf("list keys failed (%d in a row; retry in %v)", listFailures[l.loop], d), l.err)
			} else {
				listFailures[l.loop] = 0
			}
			for _, k := range l.keys {
				wake(k)
			}
		case <-tick.C:
			// Keys of listing loops not listed since the last tick are
			// forgotten (their watches end, their retries are dropped)
			// unless work is under way for them (keyState.busy: the
			// last pass that could tell said Next.Busy, or no pass has
			// ended yet), whatever is due for them: a key whose
			// passes keep failing or asking to come back (a dead BMC)
			// always has a pass due. One that runs is forgotten when its
			// pass ends, unless that pass says it busy. Keys of loops
			// without Keys (given to Add) are forgotten only when
			// released (Next.Release, Remove): each is reconciled at
			// every tick, as a listed key is when its listing comes in.
			for k, s := range keys {
				if r.Loops[k.loop].Keys == nil {
					schedule(s, time.Now())
					continue
				}
				if listFailed[k.loop] || listRunning[k.loop] {
					continue
				}
				if !s.listed && !s.busy {
					if s.running {
						s.unlisted = true
					} else {
						release(s)
					}
					continue
				}
				s.listed = false
			}
			list()
		case <-timer.C:
		}
	}
}

// done applies a pass's result to its key.
func (r *Runner) done(ctx context.Context, s *keyState, res runResult, schedule func(*keyState, time.Time)) {
	switch {
	case errors.Is(res.err, ErrNotLeader):
		s.failures++
		retry := cmp.Or(max(r.StandbyRetry, 0), DefaultStandbyRetry)
		d := min(r.backoff(s.failures), retry)
		if ctx.Err() == nil && s.failures == 1 {
			r.warn(ctx, r.Loops[res.k.loop].Name, res.k.key,
				fmt.Sprintf("pass refused: not the leader (retried every %v at most until this process leads)", retry), res.err)
		}
		schedule(s, time.Now().Add(d))
	case res.err != nil:
		s.failures++
		d := r.backoff(s.failures)
		if ctx.Err() == nil {
			r.warn(ctx, r.Loops[res.k.loop].Name, res.k.key, fmt.Sprintf("pass failed (retry in %v)", d), res.err)
		}
		schedule(s, time.Now().Add(d))
	case res.next.Requeue:
		s.failures++
		schedule(s, time.Now().Add(r.backoff(s.failures)))
	case res.next.After > 0:
		s.failures = 0
		schedule(s, time.Now().Add(res.next.After))
	default:
		s.failures = 0
	}
}

// watch forwards key's wake-ups until ctx is done; a watch that fails or
// ends early is started again after a back-off. Each watch set up wakes
// the key once, for the changes made before it was in place; so does the
// first try, which the key's first pass waits for.
func (r *Runner) watch(ctx context.Context, w func(context.Context, string) (<-chan struct{}, error), k runKey, wakes chan<- runKey) {
	for try := 1; ctx.Err() == nil; try++ {
		ch, err := w(ctx, k.key)
		if err == nil || try == 1 {
			// A watch reports only the changes made after it was set up:
			// one made between the key's last pass and now (before the
			// first watch, or while a failed one was down) would wait for
			// Resync. Reconcile the key once the watch is in place (and
			// after the first try, whatever its outcome: the key's first
			// pass waits for it).
			select {
			case wakes <- k:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			r.warn(ctx, r.Loops[k.loop].Name, k.key, "watch", err)
		} else {
			for range ch {
				try = 1
				select {
				case wakes <- k:
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.backoff(try)):
		}
	}
}

func (r *Runner) warn(ctx context.Context, loop, key, what string, err error) {
	if r.Logger == nil || ctx.Err() != nil {
		return
	}
	attrs := []slog.Attr{slog.String("loop", loop), slog.String("error", err.Error())}
	if key != "" {
		attrs = append(attrs, slog.String("key", key))
	}
	r.Logger.LogAttrs(ctx, slog.LevelWarn, "runner: "+what, attrs...)
}

// Loop returns the Reconciler as a Runner's loop named "reboot" over the
// hosts keys lists: a failed power call asks for a pass after the
// back-off, Decision.RequeueAfter schedules the next, a host gone from the
// store (ErrNotFound) is forgotten (Reconciler.Forget) and its key
// released (Next.Release: no more passes, its watch ends) until it is
// listed or added again, a host with work under way (Result.Busy, also
// when the pass fails; true when its record could not be read) is
// reported Next.Busy and one whose failed pass read it idle Next.Idle
// (the Runner keeps a busy host while its listing no longer holds it),
// and Hosts' HostWatcher, if it has one, wakes a host when its record
// changes. When Hosts is a HostLister, each listing also holds the hosts
// keys does not list whose stored record shows work under way (keys'
// listing alone when the store's List fails: HostLister); otherwise a host dropped from keys' listing
// while no Runner held its key (the process restarted, or was standby
// and never read it) is not reconciled again, even if it was left held
// off: give such a store a List, or keep a host in keys' listing until
// its work is done.
func (r *Reconciler) Loop(keys func(ctx context.Context) ([]string, error)) Loop {
	if hl, ok := r.Hosts.(HostLister); ok && keys != nil {
		keys = r.withBusy(keys, hl)
	}
	l := Loop{Name: "reboot", Keys: keys,
		Reconcile: func(ctx context.Context, name string) (Next, error) {
			res, err := r.Reconcile(ctx, name)
			if errors.Is(err, ErrNotFound) {
				r.Forget(name)
				return Next{Release: true}, nil
			}
			// Result.Busy is set also when the pass fails (true when
			// the record could not be read): a failed pass says Idle
			// when it is false.
			return Next{Requeue: res.Requeue, After: res.RequeueAfter, Busy: res.Busy, Idle: err != nil && !res.Busy}, err
		}}
	if w, ok := r.Hosts.(HostWatcher); ok {
		l.Watch = w.Watch
	}
	return l
}
