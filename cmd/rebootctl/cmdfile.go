package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// An operator's stop or cancel must land (be durable, and be obeyed: no
// reboot starts after it) in milliseconds, whatever the plan's size; but
// the executor may hold the plan store (one bbolt file, one process at a
// time) for seconds while it writes a pass that changed tens of thousands
// of records. So plan stop and plan cancel (and plan run, so that the
// commands are applied in the order they were given) first record the
// command in a
// small side file next to the store, FILE.commands (its own lock,
// FILE.commands.lock; written whole to a temporary file of a random
// name next to it, fsync'd and renamed), which needs no lock of the store. Whoever opens the store
// next (the executor, before each of its reads and writes: before every
// pass, before every 16 jobs it creates, and before any job of a plan
// with a command recorded there since it last read that plan, applied
// since or not: plan.CommandStore, pendingCmds; or any rebootctl
// command)
// applies the commands recorded there, in the order they were recorded,
// to the plans' headers (plan.CommandView, compare-and-swap) before
// anything else, and records in the side file that each was applied, or
// why not (the plan is not there, or not in a state the command applies
// to). Then the command that recorded it reads the outcome and reports
// it, with what is still finishing, as before.

// pendingCmds tells the executor whether a command of a plan landed in
// the side file since its last read of that plan's state: the executor
// asks before every job it creates (plan.CommandStore). A command applied
// already counts too: another process (the operator's own rebootctl,
// which opens the store right after recording its command) may have
// applied it after the executor read the plan, and the executor's view
// is then older than the command. Every record has a sequence number
// (cmdFile.Next, one more for each) and the file an ID (cmdFile.ID: one
// made again after a removal has another, and numbers from 1 again);
// every open of the store by the executor applies the records up to the
// file's Next as it reads it, and the pass's read of plan uuid's state
// through that open (lockedStore.GetHead, before its jobs) remembers that
// mark (saw): a record of uuid with a higher number, or in another file,
// came after the read. No other read remembers a mark: one made beside
// the pass (the power-off check's) is not what the pass decided on. A stat tells whether the file
// changed since it was last read (it is replaced whole by every write: a
// new inode, size and modification time), so it is read again only then.
type pendingCmds struct {
	mu   sync.Mutex
	read bool
	key  cmdFileKey
	// id is the file's ID, last; last the highest record number of
	// each plan in it.
	id   string
	last map[string]int64
	// seen is, per plan, the file's mark when the executor last read
	// the plan's state (every record up to it was applied then).
	seen map[string]cmdMark
}

// cmdMark names the records of one side file up to a number: those an
// open of the store applied.
type cmdMark struct {
	ID   string
	Next int64
}

// cmdFileKey tells one version of the side file from another.
type cmdFileKey struct {
	exists bool
	ino    uint64
	size   int64
	mtime  time.Time
}

func statCmdFile(store string) (cmdFileKey, error) {
	fi, err := os.Stat(cmdFilePath(store))
	if errors.Is(err, os.ErrNotExist) {
		return cmdFileKey{}, nil
	}
	if err != nil {
		return cmdFileKey{}, fmt.Errorf("the plan store's command file: %w", err)
	}
	k := cmdFileKey{exists: true, size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = uint64(st.Ino)
	}
	return k, nil
}

// saw records that the executor's pass read plan uuid's state through an
// open of the store that applied the side file's records up to m.
func (c *pendingCmds) saw(uuid string, m cmdMark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]cmdMark{}
	}
	if old, ok := c.seen[uuid]; !ok || old.ID != m.ID || m.Next > old.Next {
		c.seen[uuid] = m
	}
}

// pending reports whether the side file of the store at store holds a
// command of plan uuid recorded after the executor's last read of that
// plan's state (applied since or not), or one of a plan it never read. It
// reads the file without its lock (every write renames a whole file over
// it, so a read sees one version or the next): a file that cannot be read
// is an error.
func (c *pendingCmds) pending(store, uuid string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, err := statCmdFile(store)
	if err != nil {
		return false, err
	}
	if !c.read || k != c.key {
		var f cmdFile
		if k.exists {
			f, err = readCmdFile(store)
			if ignoredSide(err) {
				f, err = cmdFile{}, nil // never applied: nothing waits in it
			}
			if err != nil {
				return false, err
			}
		}
		last := map[string]int64{}
		for _, r := range f.Records {
			last[r.Plan] = max(last[r.Plan], r.Seq)
		}
		c.read, c.key, c.id, c.last = true, k, f.ID, last
	}
	n, ok := c.last[uuid]
	m, read := c.seen[uuid]
	return ok && (!read || m.ID != c.id || n > m.Next), nil
}

// cmdFilePath is the side file of the store at store.
func cmdFilePath(store string) string { return store + ".commands" }

// cmdRecord is one command recorded in the side file.
type cmdRecord struct {
	Seq     int64     `json:"seq"`
	Plan    string    `json:"plan"`
	Command string    `json:"command"` // run, stop or cancel
	At      time.Time `json:"at"`
	// Applied: the command was applied to the store, or refused (Error
	// says why, Kind which error: state, not_found, corrupt, invalid_uuid,
	// refused for any other).
	Applied bool   `json:"applied,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Error   string `json:"error,omitempty"`
}

// cmdFile is the side file's content.
type cmdFile struct {
	// ID names the file (random, given by the first command recorded in
	// it): one removed and made again has another, and its numbers
	// start from 1 again.
	ID      string      `json:"id,omitempty"`
	Next    int64       `json:"next"`
	Records []cmdRecord `json:"records"`
}

// cmdLockWait bounds how long one waits for the side file's lock (held
// by others for a read and a small write only).
const cmdLockWait = 10 * time.Second

// withCmdFile runs f on the side file's content with its lock held, and
// writes it back (durably) when f says it changed.
func withCmdFile(ctx context.Context, store string, f func(*cmdFile) (bool, error)) error {
	lf, err := createSide(store, cmdFilePath(store)+".lock", os.O_RDWR)
	if err != nil {
		return sideFileError(store, err)
	}
	defer lf.Close()
	st, err := checkSide(lf)
	if err == nil {
		err = trustedSide(st, store, lf.Name())
	}
	if err == nil {
		err = likeStore(lf, store)
	}
	if err != nil {
		return fmt.Errorf("the plan store's command file: %w", err)
	}
	deadline := time.Now().Add(cmdLockWait)
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("the plan store's command file %s: lock: %w", cmdFilePath(store), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	defer func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) }()
	c, err := readCmdFile(store)
	if err != nil {
		return err
	}
	changed, err := f(&c)
	if err != nil || !changed {
		return err
	}
	return writeCmdFile(store, c)
}

// readCmdFile reads the side file of store (readSide: a regular file
// with one link, made by someone who may use the store); none is an
// empty one.
func readCmdFile(store string) (cmdFile, error) {
	var c cmdFile
	b, err := readSide(store, cmdFilePath(store))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("the plan store's command file: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("the plan store's command file %s is not readable (%v): the stops and cancels it holds cannot be applied; "+
			"look at it, then remove it and give the commands again", cmdFilePath(store), err)
	}
	return c, nil
}

// writeCmdFile writes c to the side file durably: a temporary file of a
// random name in the store's directory (never a fixed name: in a sticky
// directory another user could make that name first, and no one but its
// owner, the directory's owner and root could remove it), given the
// store's owner and mode (likeStore), fsync'd, renamed over it, and the
// directory fsync'd. It is called with the side file's lock held, so a
// temporary file of this user's left by a crash (tmpPattern) is no one's
// at work, and is removed (removeOwnTmp); another user's is left alone.
// The directory is read for them at this process's first write of the
// file only (a crash ends a process: its leftovers are found by the
// next one), and again after a write of its own left its temporary file:
// not at every write, which would read a directory anyone may fill
// (/tmp) with the lock held, at every command the executor applies.
func writeCmdFile(store string, c cmdFile) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := cmdFilePath(store)
	if tmpScans.first(path) {
		removeOwnTmp(path)
	}
	if err := sideFits(store); err != nil {
		return sideFileError(store, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpPattern)
	if err != nil {
		return sideFileError(store, err)
	}
	tmp := f.Name()
	err = likeStore(f, store)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			tmpScans.again(path) // this process's own file, made above, is left: the next write looks
		}
		return fmt.Errorf("the plan store's command file: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("the plan store's command file: %w", err)
	}
	return nil
}

// tmpScans: the side files whose directory this process read for
// leftovers (removeOwnTmp) since its last write left one.
var tmpScans scanned

// scanned is a set of paths, safe for concurrent use.
type scanned struct {
	mu   sync.Mutex
	done map[string]bool
}

// first reports whether path is not in the set, and adds it.
func (s *scanned) first(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done[path] {
		return false
	}
	if s.done == nil {
		s.done = map[string]bool{}
	}
	s.done[path] = true
	return true
}

// again removes path from the set.
func (s *scanned) again(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.done, path)
}

// tmpPattern is the name of writeCmdFile's temporary files after
// FILE.commands (os.CreateTemp's pattern: the * is random).
const tmpPattern = ".*.tmp"

// removeOwnTmp removes the temporary files of the side file at path that
// a crash left (writeCmdFile's, and the fixed FILE.commands.tmp of
// earlier versions), made by this process's user, regular files: another
// user's is never touched (it is not in the way: no name is used twice).
func removeOwnTmp(path string) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		n := ent.Name()
		ours := n == base+".tmp" || strings.HasPrefix(n, base+".") && strings.HasSuffix(n, ".tmp") && len(n) > len(base)+len("..tmp")
		if !ours || !ent.Type().IsRegular() {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// recordCommand records an operator's run, stop or cancel of plan uuid in
// the side file and returns its sequence number: from then on, no reboot of
// the plan starts (the executor applies it before its next read or write
// of the store). Applied records older than keepOutcomes are dropped
// (the file keeps the commands not applied yet and the outcomes their
// commands may still read: those of the same plan too, which another
// operator's command may be about to read).
func recordCommand(ctx context.Context, store, uuid, name string, at time.Time) (int64, error) {
	var seq int64
	err := withCmdFile(ctx, store, func(c *cmdFile) (bool, error) {
		kept := c.Records[:0]
		for _, r := range c.Records {
			if !r.Applied || at.Sub(r.At) < keepOutcomes {
				kept = append(kept, r)
			}
		}
		if c.ID == "" {
			c.ID = newLeaseID()
		}
		c.Next++
		seq = c.Next
		c.Records = append(kept, cmdRecord{Seq: seq, Plan: uuid, Command: name, At: at})
		return true, nil
	})
	return seq, err
}

// keepOutcomes is how long the side file keeps an applied command's
// outcome, at least, for the command that recorded it to read.
const keepOutcomes = 24 * time.Hour

// cmdFuncs are the commands the side file holds.
var cmdFuncs = map[string]func(plan.Plan) (plan.Plan, error){"run": plan.Run, "stop": plan.Stop, "cancel": plan.Cancel}

// applyCommands applies the commands recorded in the side file of the
// store at store and not applied yet, in their order, to st (the store,
// opened), and records their outcomes. A command the store refuses for
// good (its plan is not there, is corrupt, is in a state it does not
// apply to, its UUID is not a plan UUID: any error but the passing ones
// of transientApply) is recorded refused, and the store stays usable; on
// a passing error (the context, a compare-and-swap lost 100 times, an I/O
// error of the store's file) it stays to apply and the error is
// returned: the store must not be used this time (a stop may wait in the
// file). A side file this process may
// not use (sideUsable) never keeps it from the store: applyUnmarked.
// It returns the file's mark: every record up to it is applied.
func applyCommands(ctx context.Context, st *plan.BoltStore, store string, note func(error)) (mark cmdMark, err error) {
	if _, err := os.Lstat(cmdFilePath(store)); errors.Is(err, os.ErrNotExist) {
		return cmdMark{}, nil // no command was ever recorded
	}
	if why := sideUsable(store); why != nil {
		return applyUnmarked(ctx, st, store, why, note)
	}
	err = withCmdFile(ctx, store, func(c *cmdFile) (bool, error) {
		mark = cmdMark{ID: c.ID, Next: c.Next}
		return applyRecords(ctx, st, c)
	})
	return mark, err
}

// applyUnmarked is applyCommands for a side file this process may not use
// (why, from sideUsable): one made by another user, or a link, is ignored
// (never applied; note says so); one it cannot rewrite (its lock is
// another user's, or a file it makes there would be unusable by the
// store's owner or group) is read without its lock (every write renames
// a whole file over it) and its commands applied to the store, but left
// as it is: a command applied again changes nothing (onceApplied), and
// the next process that may rewrite it marks them applied. note says
// what was done (once per process: the caller's log).
func applyUnmarked(ctx context.Context, st *plan.BoltStore, store string, why error, note func(error)) (cmdMark, error) {
	c, err := readCmdFile(store)
	if ignoredSide(err) {
		note(why) // what sideUsable found, as the operator's command says it
		return cmdMark{}, nil
	}
	if err != nil {
		return cmdMark{}, err
	}
	changed, err := applyRecords(ctx, st, &c)
	if err != nil {
		return cmdMark{}, err
	}
	if changed {
		note(fmt.Errorf("the commands recorded in %s are applied to the store, but that file is left as it is (%w); "+
			"the next command given by a user who may rewrite it marks them applied", cmdFilePath(store), why))
	}
	return cmdMark{ID: c.ID, Next: c.Next}, nil
}

// applyRecords applies c's records not applied yet to st, in their
// order, and marks them applied (or refused) in c.
func applyRecords(ctx context.Context, st *plan.BoltStore, c *cmdFile) (changed bool, err error) {
	for i := range c.Records {
		r := &c.Records[i]
		if r.Applied {
			continue
		}
		f, ok := cmdFuncs[r.Command]
		if !ok {
			r.Applied, r.Kind, r.Error, changed = true, "unknown", "unknown command "+r.Command, true
			continue
		}
		_, err := plan.CommandView(ctx, st, r.Plan, onceApplied(c.ID, *r, f))
		if errors.Is(err, errRecordedAlready) {
			err = nil // applied before a crash kept it from being marked here
		}
		if err != nil && transientApply(ctx, err) {
			return changed, fmt.Errorf("apply the %s of plan %s recorded at %s: %w", r.Command, r.Plan, r.At.Format(time.RFC3339), err)
		}
		r.Applied, changed = true, true
		if err != nil {
			r.Kind, r.Error = refusalKind(err), err.Error()
		}
	}
	return changed, nil
}

// errRecordedAlready: the command is in the plan's Commands already.
var errRecordedAlready = errors.New("the command is recorded in the plan already")

// onceApplied is plan.RecordReplay(r.Command, r.At, id, r.Seq, f): the
// plan keeps the highest number of the side file id's records applied
// to it (plan.Replays). A record numbered up to that was applied to the
// store already, and the applier stopped (killed, or its write of the
// side file failed, or it may not rewrite the file: applyUnmarked)
// before it marked it applied in the side file; or a later record of
// the plan was applied (records are applied in their order, so this
// one was applied or refused before it), and applied now it would undo
// the later ones (an old run after the operator's stop). It is not
// applied again (a cancel of a canceled plan would be refused, and the
// operator told that its own cancel failed): errRecordedAlready, and
// nothing is written. The numbers, not the records' times, decide: a
// clock stepped back (NTP, a restored VM, another host's) must not make
// a new stop look older than the plan's commands. A plan that keeps no
// number of id (the file is new, or the plan was last commanded by an
// older rebootctl) skips the command only when its Commands hold that
// command at that time; a file with no ID (written by a rebootctl that
// gave none) is judged by onceRecorded alone.
func onceApplied(id string, r cmdRecord, f func(plan.Plan) (plan.Plan, error)) func(plan.Plan) (plan.Plan, error) {
	if id == "" {
		return onceRecorded(r.Command, r.At, f)
	}
	rec := plan.RecordReplay(r.Command, r.At, id, r.Seq, f)
	return func(p plan.Plan) (plan.Plan, error) {
		if seq, ok := p.Replayed(id); ok {
			if r.Seq <= seq {
				return p, errRecordedAlready
			}
			return rec(p)
		}
		for _, m := range p.Commands {
			if m.Command == r.Command && m.At.Equal(r.At) {
				return p, errRecordedAlready
			}
		}
		return rec(p)
	}
}

// onceRecorded is plan.Record(command, at, f), for a record of a side
// file with no ID (nor numbers the plan keeps): a plan whose Commands
// hold that command at that time already is not applied again
// (errRecordedAlready, as onceApplied). Commands keep the last
// plan.MaxCommands only: once they are full, a command recorded before
// the oldest of them is taken as applied too (applied, then pushed out
// by later ones; or, never applied, older than plan.MaxCommands commands
// applied since). That judges by the clock, and a clock stepped back
// misjudges it: it is only for such files, which no rebootctl writes
// any more.
func onceRecorded(command string, at time.Time, f func(plan.Plan) (plan.Plan, error)) func(plan.Plan) (plan.Plan, error) {
	rec := plan.Record(command, at, f)
	return func(p plan.Plan) (plan.Plan, error) {
		for _, m := range p.Commands {
			if m.Command == command && m.At.Equal(at) {
				return p, errRecordedAlready
			}
		}
		if len(p.Commands) >= plan.MaxCommands && at.Before(p.Commands[0].At) {
			return p, errRecordedAlready
		}
		return rec(p)
	}
}

// transientApply says whether err, from applying a recorded command to the
// opened store, may pass (the command is to be applied again at the next
// open) rather than be the store's refusal for good: the context ended,
// the compare-and-swap was lost every time, or the store's file could not
// be read or written (an I/O error: a full disk that is freed, a flaky
// disk). Every other error is a refusal for good: left to apply, it would
// fail every later open of the store.
func transientApply(ctx context.Context, err error) bool {
	var errno syscall.Errno
	var pathErr *fs.PathError
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, plan.ErrConflict) || errors.Is(err, plan.ErrLocked) ||
		errors.As(err, &errno) || errors.As(err, &pathErr)
}

// refusalKind is the Kind of a command refused with err.
func refusalKind(err error) string {
	switch {
	case errors.Is(err, plan.ErrState):
		return "state"
	case errors.Is(err, plan.ErrNotFound):
		return "not_found"
	case errors.Is(err, plan.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, plan.ErrInvalidUUID):
		return "invalid_uuid"
	}
	return "refused"
}

// commandOutcome returns the record seq of the side file (its outcome,
// once applied), false when it is not there.
func commandOutcome(ctx context.Context, store string, seq int64) (rec cmdRecord, found bool, err error) {
	err = withCmdFile(ctx, store, func(c *cmdFile) (bool, error) {
		for _, r := range c.Records {
			if r.Seq == seq {
				rec, found = r, true
			}
		}
		return false, nil
	})
	return rec, found, err
}

// errOutcome is the error of a refused command's outcome, wrapping the
// library's sentinel so that explain and the exit code treat it as the
// command's own error.
func errOutcome(r cmdRecord) error {
	switch r.Kind {
	case "":
		return nil
	case "state":
		return fmt.Errorf("%w: %s", plan.ErrState, r.Error)
	case "not_found":
		return fmt.Errorf("%w: %s", plan.ErrNotFound, r.Error)
	case "corrupt":
		return fmt.Errorf("%w: %s", plan.ErrCorrupt, r.Error)
	case "invalid_uuid":
		return fmt.Errorf("%w: %s", plan.ErrInvalidUUID, r.Error)
	}
	return errors.New(r.Error)
}
