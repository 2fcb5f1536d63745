package main

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A command that cannot be recorded next to the store (sideUsable) is
// applied to the store directly (commandDirect), and never appears in
// FILE.commands: the executor learns of it from the store file itself.
// After each of its opens, with the store's lock still held, the
// executor gives the file a modification time no write can give it (the
// one its last write gave it, plus 1 ns: a write stamps the kernel's
// clock, which moves by whole ticks), and remembers the file's stamp
// (inode, size, modification time); before every job it creates, a stat
// tells whether the stamp is still its own (CommandPending): another
// process's write since its last open, or one found at an open since the
// pass read the plan, sends the pass back to read the plan's state. A
// read changes nothing; another writer (plan create, another command)
// costs the pass one read of the plan's header. Where the time cannot
// be set (the executor neither owns the store nor is root, or the file
// system keeps coarse times), the stamp alone is compared: a write in
// the same clock tick as the executor's last may go unseen until the
// pass's next read (16 jobs at most).
type storeWrites struct {
	mu    sync.Mutex
	known bool
	mark  storeStamp
	// epoch counts the other processes' writes found at this
	// process's opens; seen is, per plan, the epoch as of the pass's
	// last read of its state.
	epoch int64
	seen  map[string]int64
}

// storeStamp tells one version of the store file from another.
type storeStamp struct {
	ino   uint64
	size  int64
	mtime int64 // nanoseconds since the epoch
}

func stampOf(path string) (storeStamp, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return storeStamp{}, err
	}
	return storeStamp{ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, nil
}

// opened is called with the store open (its lock held): it counts a write
// by another process since this one's last open, and returns the epoch.
func (w *storeWrites) opened(path string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, err := stampOf(path); err != nil || w.known && s != w.mark {
		w.epoch++
	}
	return w.epoch
}

// closing is called with the store still open (its lock held), after
// this process's reads and writes: it gives the file a modification time
// of its own when a write changed it, and remembers its stamp.
func (w *storeWrites) closing(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, err := stampOf(path)
	if err != nil {
		w.known = false
		return
	}
	if w.known && s == w.mark {
		return
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(s.mtime + 1)}
	if unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if s2, err := stampOf(path); err == nil {
			s = s2
		}
	}
	w.known, w.mark = true, s
}

// saw records that the pass read plan uuid's state through an open at
// epoch.
func (w *storeWrites) saw(uuid string, epoch int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]int64{}
	}
	w.seen[uuid] = max(w.seen[uuid], epoch)
}

// since says whether another process may have written the store since
// the pass last read plan uuid's state (never, before this process's
// first open: the pass reads the state before its first job).
func (w *storeWrites) since(path, uuid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epoch > w.seen[uuid] {
		return true
	}
	if !w.known {
		return false
	}
	s, err := stampOf(path)
	return err != nil || s != w.mark
}
