package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// The plan store is a bbolt file one process opens at a time. The
// executor opens it for each read and write of its pass (lockedStore),
// often back to back; an operator's command polling for the file's lock
// could keep missing the short gaps between them. So a command that
// waits for the store holds FILE.wait locked (flock, exclusive) while it
// waits, and the executor, before each open, lets it go first: it waits
// while FILE.wait is locked, at most maxYield each time (a command that
// waits longer, e.g. one stuck on a terminal, never stops the executor).
// A process that dies drops its lock with it.

// maxYield is how long the executor lets a waiting command go first, at
// most, before one store operation.
const maxYield = 2 * time.Second

// yieldPoll is how often the executor looks whether a command still
// waits.
const yieldPoll = 5 * time.Millisecond

func waitPath(store string) string { return store + ".wait" }

// announceWait takes FILE.wait's lock for a command about to wait for the
// store; release drops it once the command has the store (or gave up). A
// wait file that cannot be made or locked (a read-only directory, another
// command waiting already) is no error: the command waits as it would
// without it. The executor yields only to a FILE.wait made by a user who
// may use the store (trustedSide): another user's, held locked for ever,
// would slow every open of the executor by maxYield.
func announceWait(store string) (release func()) {
	f, err := createSide(store, waitPath(store), os.O_RDWR)
	if err != nil {
		return func() {} // none made that the store's users could not open either
	}
	// The store's owner and mode (sideowner.go). A file it refuses (a
	// hard link to another file) is not locked either.
	if err := likeStore(f, store); errors.Is(err, errNotSideFile) {
		f.Close()
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// yieldToCommands waits while a command waits for the store (FILE.wait
// is locked), at most maxYield, or until ctx ends.
func yieldToCommands(ctx context.Context, store string) {
	f, err := openSide(waitPath(store), os.O_RDONLY)
	if err != nil {
		return // no command ever waited
	}
	defer f.Close()
	if st, err := checkSide(f); err != nil || trustedSide(st, store, f.Name()) != nil {
		return // another user's file (or a link): no command of the store's users waits on it
	}
	deadline := time.Now().Add(maxYield)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(yieldPoll):
		}
	}
}
