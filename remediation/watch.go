package remediation

import (
	"context"
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
// watch alone (its host's evidence is then seen at its next pass).
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
	if err != nil {
		// The host store cannot watch (now): the Machine's own watch
		// still wakes it, and its host's evidence is seen at its next
		// pass (PollInterval).
		hch = nil
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
		defer cancel()
		for {
			select {
			case _, ok := <-mch:
				if !ok {
					return
				}
				now, err := hostOf(wctx)
				if err == nil && now != h {
					ch, herr := startHost(now)
					if herr != nil {
						ch = nil // as above: the Machine's watch alone
					}
					h, hch = now, ch
				}
				wake()
				if err != nil {
					return
				}
			case _, ok := <-hch:
				if !ok {
					return
				}
				wake()
			}
		}
	}()
	return out, nil
}
