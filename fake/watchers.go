package fake

import (
	"context"
	"sync"
)

// watchers are the channels watching a store's records by name, with the
// contract of reboot.HostWatcher: a buffer of one, a send dropped when
// full (the change is already signalled), never blocking the writer.
// The store's own lock guards them.
type watchers map[string]map[chan struct{}]bool

// add registers a channel for name under mu (the store's lock, not held by
// the caller) and closes it once ctx is done.
func (w *watchers) add(ctx context.Context, mu *sync.Mutex, name string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	mu.Lock()
	if *w == nil {
		*w = watchers{}
	}
	if (*w)[name] == nil {
		(*w)[name] = map[chan struct{}]bool{}
	}
	(*w)[name][ch] = true
	mu.Unlock()
	go func() {
		<-ctx.Done()
		mu.Lock()
		defer mu.Unlock()
		delete((*w)[name], ch)
		close(ch)
	}()
	return ch
}

// notify signals name's watchers; the caller holds the store's lock.
func (w watchers) notify(name string) {
	for ch := range w[name] {
		select {
		case ch <- struct{}{}:
		default: // a change is already signalled
		}
	}
}
