package remediation

import (
	"context"
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
// whenever either does. The host is resolved with hostOf when the watch
// starts and again whenever the Machine's watch fires (before that wake
// is passed on): when the answer changed (a Machine provisioned onto a
// host, or moved), the host watch is restarted on the new host. The
// channel is closed once ctx is done, either source's channel closes, or
// a new resolution fails (the Runner then starts the watch again). A
// Machine watch that fails to start, or a first resolution that fails,
// fails the call; a host watch that cannot start leaves the Machine's
// watch alone while it is tried again with a back-off.
func watchWithHost(ctx context.Context, machine func(context.Context) (<-chan struct{}, error),
	hostOf func(context.Context) (string, error), watchHost func(context.Context, string) (<-chan struct{}, error)) (<-chan struct{}, error) {
	wctx, cancel := context.WithCancel(ctx)
	hcancel := context.CancelFunc(func() {})
	// startHost ends the current host watch and watches h (a nil channel,
	// which never fires, when the Machine has no host).
	startHost := func(h string) (<-chan struct{}, error) {
		hcancel()
		if h == "" {
			return nil, nil
		}
		var hctx context.Context
		hctx, hcancel = context.WithCancel(wctx)
		return watchHost(hctx, h)
	}
	mch, err := machine(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	h, err := hostOf(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	hch, err := startHost(h)
	var retry <-chan time.Time // the host watch failed: start it again then
	backoff := watchRetryMin
	type hostTry struct {
		h      string
		ch     <-chan struct{}
		err    error
		cancel context.CancelFunc
	}
	retried := make(chan hostTry, 1)
	if err != nil {
		// The host store cannot watch (now): the Machine's own watch
		// still wakes it, and the host watch is tried again with a
		// back-off.
		hch, retry = nil, time.After(backoff)
		backoff = min(2*backoff, watchRetry)
	}
	out := make(chan struct{}, 1)
	wake := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	// try watches host hh on its own goroutine (a Watch that hangs must
	// not stop the Machine's wakes); its result comes on retried, or is
	// dropped once the watch ends.
	try := func(hh string) {
		rctx, rcancel := context.WithCancel(wctx)
		go func() {
			ch, err := watchHost(rctx, hh)
			select {
			case retried <- hostTry{h: hh, ch: ch, err: err, cancel: rcancel}:
			case <-wctx.Done():
				rcancel()
			}
		}()
	}
	type resolution struct {
		h   string
		err error
	}
	resolved := make(chan resolution, 1)
	resolving := false
	// apply takes a resolution of the Machine's host; false: it failed
	// (the watch ends, and the Runner starts it again).
	apply := func(r resolution) bool {
		resolving = false
		if r.err != nil {
			return false
		}
		if r.h != h {
			hcancel()
			hcancel = func() {}
			h, hch, retry, backoff = r.h, nil, nil, watchRetryMin
			if h != "" {
				try(h)
			}
		}
		return true
	}
	go func() {
		defer close(out)
		defer cancel()
		for {
			select {
			case _, ok := <-mch:
				if !ok {
					return
				}
				if !resolving {
					// The Machine's host, asked again on its own
					// goroutine and bounded: a store that does not answer
					// must not silence the Machine's wakes. A quick answer
					// is taken before the wake is passed on (the pass then
					// sees the new host's watch started).
					resolving = true
					go func() {
						rctx, rcancel := context.WithTimeout(wctx, hostOfTimeout)
						defer rcancel()
						now, err := hostOf(rctx)
						select {
						case resolved <- resolution{now, err}:
						case <-wctx.Done():
						}
					}()
					select {
					case r := <-resolved:
						if !apply(r) {
							return
						}
					case <-time.After(resolveWait):
					}
				}
				wake()
			case r := <-resolved:
				if !apply(r) {
					return // the Runner starts the watch again
				}
			case _, ok := <-hch:
				if !ok {
					return
				}
				wake()
			case <-retry:
				retry = nil
				try(h)
			case r := <-retried:
				switch {
				case r.h != h: // the Machine moved meanwhile
					r.cancel()
				case r.err != nil:
					r.cancel()
					retry = time.After(backoff)
					backoff = min(2*backoff, watchRetry)
				default:
					hcancel()
					hcancel, hch, backoff = r.cancel, r.ch, watchRetryMin
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
	// is how long a Machine's wake waits for it before it is passed on.
	hostOfTimeout = 30 * time.Second
	resolveWait   = 50 * time.Millisecond
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
