package remediation

import (
	"context"
	"fmt"
	"time"
)

// MachineWatcher is an optional ability of a MachineStore: it says when a
// Machine changes (the health checker marks it, another writer saves its
// State), so that Reconciler.Loop looks at it at once. Its contract is
// reboot.HostWatcher's: Watch returns a channel that receives a value
// after every change of the named Machine's record made after Watch
// returned (changes may be coalesced into one value), until ctx is done;
// then the channel is closed. Sends must never block the store's writers
// (a buffer of one, dropped when full, is right). A store that also sees
// the Machine's Node change may report those too.
//
// A MachineStore that is not one is polled by Loop (see Reconciler.Loop).
type MachineWatcher interface {
	Watch(ctx context.Context, name string) (<-chan struct{}, error)
}

// RecordWatcher is an optional ability of a RecordStore, with
// MachineWatcher's contract for the named record: the MachineStore that
// Records returns is a MachineWatcher when its RecordStore is one.
type RecordWatcher interface {
	Watch(ctx context.Context, name string) (<-chan struct{}, error)
}

// watchingRecordMachines is Records' MachineStore over a RecordWatcher.
type watchingRecordMachines struct {
	recordMachines
	w RecordWatcher
}

func (m watchingRecordMachines) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return m.w.Watch(ctx, name)
}

// watchWithHost merges a Machine's watch with its host's into one
// channel that receives a value (coalesced, never blocking the sources)
// whenever either does. Only the Machine's watch is started before it
// returns (its failure fails the call); everything about the host runs
// as tasks of the one goroutine that owns the watch's state, each on its
// own goroutine, bounded, its result coming back on a channel, so that a
// store that hangs never silences the Machine's wakes:
//
//   - the host is resolved with hostOf (hostOfTimeout per call) when the
//     watch starts and again whenever the Machine's watch fires; a wake
//     that comes while a resolution is in flight asks again once it has
//     answered (that answer may predate the change). A Machine wake is
//     passed on once its resolution is applied, or after resolveWait;
//   - when the answer changed (a Machine provisioned onto a host, or
//     moved), the host watch is started anew on the new host; a host
//     watch that fails, or does not start within hostWatchStart, is
//     tried again with a back-off, and a failed resolution too.
//
// The channel is closed once ctx is done or either source's channel
// closes (the Runner then starts the watch again).
func watchWithHost(ctx context.Context, machine func(context.Context) (<-chan struct{}, error),
	hostOf func(context.Context) (string, error), watchHost func(context.Context, string) (<-chan struct{}, error)) (<-chan struct{}, error) {
	wctx, cancel := context.WithCancel(ctx)
	mch, err := machine(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan struct{}, 1)
	wake := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	type resolution struct {
		h   string
		err error
	}
	type hostTry struct {
		h      string
		ch     <-chan struct{}
		err    error
		cancel context.CancelFunc
	}
	// Every task's result is sent with a select on wctx.Done: none is
	// left blocked once the watch ends.
	resolved := make(chan resolution, 1)
	tried := make(chan hostTry, 1)
	// resolve asks hostOf on its own goroutine; the channel it returns is
	// closed once the call is made.
	resolve := func() <-chan struct{} {
		called := make(chan struct{})
		go func() {
			rctx, rcancel := context.WithTimeout(wctx, hostOfTimeout)
			defer rcancel()
			close(called)
			h, err := hostOf(rctx)
			select {
			case resolved <- resolution{h, err}:
			case <-wctx.Done():
			}
		}()
		return called
	}
	try := func(h string) context.CancelFunc {
		tctx, tcancel := context.WithCancel(wctx)
		go func() {
			deadline := time.AfterFunc(hostWatchStart, tcancel)
			ch, err := watchHost(tctx, h)
			if !deadline.Stop() && err == nil {
				err = fmt.Errorf("watch host %s: not started within %s", h, hostWatchStart)
			}
			select {
			case tried <- hostTry{h: h, ch: ch, err: err, cancel: tcancel}:
			case <-wctx.Done():
				tcancel()
			}
		}()
		return tcancel
	}
	var (
		h                  string           // the host watched (or being tried)
		known              bool             // h was resolved once
		hch                <-chan struct{}  // h's watch, once up
		hcancel            = func() {}      // ends h's watch, or its try
		resolving, again   bool             // a resolution in flight; ask again when it answers
		pending            <-chan time.Time // a Machine wake waits for its resolution until then
		retryHost, retryOf <-chan time.Time // back-offs of the host watch and of the resolution
		hostBackoff        = watchRetryMin  // next back-off of the host watch
		ofBackoff          = watchRetryMin  // next back-off of the resolution
	)
	ask := func() {
		if resolving {
			again = true
			return
		}
		resolving, retryOf = true, nil
		resolve()
	}
	watch := func(nh string) {
		hcancel()
		h, hch, hcancel, retryHost, hostBackoff = nh, nil, func() {}, nil, watchRetryMin
		if h != "" {
			hcancel = try(h)
		}
	}
	passOn := func() {
		if pending != nil {
			pending = nil
			wake()
		}
	}
	// The first resolution is asked before Watch returns (the Runner's
	// first pass follows at once), not awaited.
	resolving = true
	<-resolve()
	go func() {
		defer close(out)
		defer cancel()
		defer func() { hcancel() }()
		for {
			select {
			case <-wctx.Done():
				return
			case _, ok := <-mch:
				if !ok {
					return
				}
				ask()
				if pending == nil {
					pending = time.After(resolveWait)
				}
			case <-pending:
				pending = nil
				wake()
			case r := <-resolved:
				resolving = false
				switch {
				case r.err != nil && again:
				case r.err != nil:
					retryOf = time.After(ofBackoff)
					ofBackoff = min(2*ofBackoff, watchRetry)
				default:
					ofBackoff = watchRetryMin
					if !known || r.h != h {
						known = true
						watch(r.h)
					}
				}
				if again {
					again = false
					ask()
				}
				passOn()
			case <-retryOf:
				retryOf = nil
				ask()
			case _, ok := <-hch:
				if !ok {
					return
				}
				wake()
			case <-retryHost:
				retryHost = nil
				hcancel = try(h)
			case r := <-tried:
				switch {
				case r.h != h || hch != nil: // the Machine moved meanwhile
					r.cancel()
				case r.err != nil:
					r.cancel()
					retryHost = time.After(hostBackoff)
					hostBackoff = min(2*hostBackoff, watchRetry)
				default:
					hcancel, hch, hostBackoff = r.cancel, r.ch, watchRetryMin
					wake() // a change while the host was not watched
				}
			}
		}
	}()
	return out, nil
}

// A watch that could not start (a host watch, or a Machine watch replaced
// by polling meanwhile) is tried again after watchRetryMin, doubling up to
// watchRetry.
const (
	watchRetryMin = time.Second
	watchRetry    = time.Minute
	// hostOfTimeout bounds one HostOf of a Machine's watch; resolveWait
	// is how long a Machine's wake waits for it before it is passed on;
	// hostWatchStart bounds the start of one host watch.
	hostOfTimeout  = 30 * time.Second
	resolveWait    = 50 * time.Millisecond
	hostWatchStart = 30 * time.Second
)

// withRetry returns the watch try makes once it starts (with one wake:
// changes while it was not in place), and fallback's until then; try is
// called again after watchRetryMin, doubling up to watchRetry. The
// channel closes when ctx is done or the watch in use closes.
func withRetry(ctx context.Context, try, fallback func(context.Context) (<-chan struct{}, error)) (<-chan struct{}, error) {
	fctx, fcancel := context.WithCancel(ctx)
	fch, err := fallback(fctx)
	if err != nil {
		fcancel()
		return nil, err
	}
	out := make(chan struct{}, 1)
	wake := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(out)
		defer fcancel()
		backoff := watchRetryMin
		retry := time.After(backoff)
		in := fch
		type watchTry struct {
			ch  <-chan struct{}
			err error
		}
		tried := make(chan watchTry, 1)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-in:
				if !ok {
					return
				}
				wake()
			case <-retry:
				// On its own goroutine: the fallback's wakes go on while
				// a Watch that hangs is tried.
				retry = nil
				go func() {
					ch, err := try(ctx)
					tried <- watchTry{ch, err}
				}()
			case r := <-tried:
				if r.err != nil {
					backoff = min(2*backoff, watchRetry)
					retry = time.After(backoff)
					continue
				}
				fcancel() // the fallback is no longer needed
				in = r.ch
				wake()
			}
		}
	}()
	return out, nil
}
