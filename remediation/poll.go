package remediation

import (
	"context"
	"errors"
	"sync"
	"time"
)

// poller is the watch of a MachineStore that cannot watch, shared by
// every Machine of one Loop: while any Machine is watched, it lists the
// store once every interval (MachineStore.List, each call bounded by
// listTimeout or the interval, whichever is longer; ticks missed meanwhile
// are skipped) and wakes the watches of the Machines whose Version changed
// (or that appeared or went) since the watch started or the last
// listing. Its cost is one List per interval, whatever the number of
// Machines; a listing that fails wakes every watched Machine (their passes
// read them).
type poller struct {
	s     MachineStore
	every time.Duration

	mu sync.Mutex
	// subs are the watches per Machine name.
	subs map[string]map[*pollSub]struct{}
	// listed are the Versions of the last successful listing ("" for a
	// Machine it did not hold), nil before the first.
	listed map[string]string
	// stop ends the listing goroutine (nil when none runs).
	stop context.CancelFunc
	n    int
}

// pollSub is one watch: its channel and the Version it last reported.
type pollSub struct {
	ch   chan struct{}
	last string
}

func newPoller(s MachineStore, every time.Duration) *poller {
	return &poller{s: s, every: every, subs: map[string]map[*pollSub]struct{}{}}
}

// Watch returns a channel that receives a value after a listing finds
// the Machine's Version changed; it is closed once ctx is done.
func (p *poller) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	sub := &pollSub{ch: make(chan struct{}, 1)}
	p.mu.Lock()
	v, known := p.listed[name]
	p.mu.Unlock()
	if !known { // not listed yet (the first watch, or a new Machine)
		sub.last = p.version(ctx, name)
	} else {
		sub.last = v // a change since that listing wakes it (at worst, once more than needed)
	}
	p.mu.Lock()
	if p.subs[name] == nil {
		p.subs[name] = map[*pollSub]struct{}{}
	}
	p.subs[name][sub] = struct{}{}
	p.n++
	if p.stop == nil {
		lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		p.stop = stop
		go p.run(lctx)
	}
	p.mu.Unlock()
	context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.subs[name], sub)
		if len(p.subs[name]) == 0 {
			delete(p.subs, name)
		}
		close(sub.ch)
		if p.n--; p.n == 0 {
			p.stop()
			p.stop = nil
			p.listed = nil // stale once nobody listens
		}
	}) // if ctx is already done, this runs at once
	return sub.ch, nil
}

// version reads one Machine's Version ("" if it is missing or the read
// failed).
func (p *poller) version(ctx context.Context, name string) string {
	gctx, cancel := context.WithTimeout(ctx, p.every)
	defer cancel()
	rec, err := p.s.Get(gctx, name)
	if errors.Is(err, ErrNotFound) || err != nil {
		return ""
	}
	return rec.Version
}

// listTimeout bounds one listing of the poller when PollInterval is
// shorter.
const listTimeout = 2 * time.Minute

// run lists the store every interval until ctx is done.
func (p *poller) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A listing may take longer than the interval (a large fleet):
		// bounded by listTimeout, the ticks meanwhile are skipped.
		lctx, cancel := context.WithTimeout(ctx, max(p.every, listTimeout))
		recs, err := p.s.List(lctx)
		cancel()
		if err != nil {
			// Nothing is known: every watched Machine is woken, and its
			// pass reads it (the store is not deaf to a failing List).
			p.mu.Lock()
			if ctx.Err() != nil {
				p.mu.Unlock()
				return
			}
			for _, subs := range p.subs {
				for sub := range subs {
					select {
					case sub.ch <- struct{}{}:
					default:
					}
				}
			}
			p.mu.Unlock()
			continue
		}
		listed := make(map[string]string, len(recs))
		for _, rec := range recs {
			listed[rec.Machine.Name] = rec.Version
		}
		p.mu.Lock()
		if ctx.Err() != nil { // stopped meanwhile: nobody listens
			p.mu.Unlock()
			return
		}
		p.listed = listed
		for name, subs := range p.subs {
			v := listed[name]
			for sub := range subs {
				if sub.last != v {
					sub.last = v
					select {
					case sub.ch <- struct{}{}:
					default:
					}
				}
			}
		}
		p.mu.Unlock()
	}
}
