package remediation

import (
	"context"
	"sync"
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

// mergeWatches starts every watch and returns one channel that receives a
// value (coalesced, never blocking the sources) whenever any of them does;
// it is closed once ctx is done or any source's channel closes (the
// Runner then starts the watch again). A watch that fails to start fails
// the merge.
func mergeWatches(ctx context.Context, watches ...func(context.Context) (<-chan struct{}, error)) (<-chan struct{}, error) {
	wctx, cancel := context.WithCancel(ctx)
	var chs []<-chan struct{}
	for _, w := range watches {
		ch, err := w(wctx)
		if err != nil {
			cancel()
			return nil, err
		}
		chs = append(chs, ch)
	}
	out := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel() // one source ended: end them all
			for range ch {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		cancel()
		close(out)
	}()
	return out, nil
}
