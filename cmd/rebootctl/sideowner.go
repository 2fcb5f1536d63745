package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The side files of the store (FILE.commands, FILE.commands.lock,
// FILE.wait) are made by whoever gives a command: an operator with sudo
// as often as the service user the executor runs as (a systemd unit with
// User=), who owns the store. A side file root made for itself, mode
// 0600, would keep the executor from its store for good (it opens
// FILE.commands.lock before every read and write). So every side file
// gets the store file's owner (when made as root, who may give it; made
// by a member of the store's group, the store's group) and permission
// bits; and when the store's directory lets no other user in, others get
// the bits of whoever would reach the file as "other" only: the store's
// owner when it is not a member of the file's group, the store's group
// when the file could not be given it (made by the store's owner, not a
// member of its group: the executor applying an operator's command)
// (sidePerm). None is ever opened through a symbolic link, nor waited on
// (openSide: O_NONBLOCK, so a FIFO there is refused at once), and none
// but a regular file with one link is read, written, locked, or gets an
// owner or mode (checkSide).
//
// One rule decides whether the side files are used at all (sideUsable):
// a command is recorded in FILE.commands only when FILE.commands and its
// lock are (if there) regular files with one link made by someone who
// may use the store (trustedSide), and a file this process makes there
// would be usable by the store's owner and group (sideFits). Otherwise
// the command is applied to the store directly (commandDirect), and the
// executor notices it before its next job (storeWrites); a side file
// made by someone else is never applied (said once, with its owner and
// the fix), and one this process cannot rewrite is applied but left as
// it is (applyUnmarked): no side file ever keeps a command or the
// executor from the store.

// storeOwner is the owner and permission bits of the store file.
type storeOwner struct {
	uid, gid int
	perm     fs.FileMode
	known    bool
}

// ownerOf returns the owner of the store file at store (known false when
// it cannot be read: plan create's store, not made yet).
func ownerOf(store string) storeOwner {
	fi, err := os.Stat(store)
	if err != nil {
		return storeOwner{perm: 0o600}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return storeOwner{perm: fi.Mode().Perm()}
	}
	return storeOwner{uid: int(st.Uid), gid: int(st.Gid), perm: fi.Mode().Perm(), known: true}
}

// openSide opens the side file at path with flag (O_CREATE to make it,
// mode 0600 until likeStore), never through a symbolic link
// (O_NOFOLLOW): a side file's directory is often the store owner's, who
// could point FILE.commands.lock at any file, and a command given with
// sudo would then lock, chown and chmod that file. It opens with
// O_NONBLOCK (a FIFO another user made there would otherwise block the
// open for ever, with the store locked: ownfile.Opener does the same for
// the store; it changes nothing for a regular file's reads, writes and
// locks) and refuses what is not a regular file with one link
// (checkSide) before a byte is read or written. Every open of a side
// file goes through it.
func openSide(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := checkSide(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readSide reads the side file at path, of the store at store (openSide,
// then its own file: checkSide), made by someone who may use the store
// (trustedSide).
func readSide(store, path string) ([]byte, error) {
	f, err := openSide(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := checkSide(f)
	if err != nil {
		return nil, err
	}
	if err := trustedSide(st, store, path); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// errForeignSideFile: a side file made by a user who may not use the
// store (in a directory others may write, any local user may make
// FILE.commands before the first command does).
var errForeignSideFile = errors.New("made by a user who may not use the plan store")

// trustedSide refuses the side file at path (st its stat) unless its
// owner may use the store: the store's owner, root, this process's user
// (its own file, made a moment ago: likeStore gives it the store's group
// after), or, for a store its group may write, a member of that group
// (one the user database names, or the owner of a file of that group in
// a directory others may not write: only a member may give a file its
// group there).
func trustedSide(st *syscall.Stat_t, store, path string) error {
	o := ownerOf(store)
	uid, gid := int(st.Uid), int(st.Gid)
	if !o.known || uid == o.uid || uid == 0 || uid == os.Geteuid() {
		return nil
	}
	if o.perm&0o020 != 0 && (userInGroup(uid, o.gid) || gid == o.gid && !dirOthersWrite(store)) {
		return nil
	}
	return fmt.Errorf("%s is %w (its owner, %s, is not the store's owner, uid %d, nor root, nor a member of the store's group, gid %d, who may write it): "+
		"it is ignored (nothing it holds is applied) and commands go to the store directly; look at it (who made it?) and remove it (as root: rm %s)",
		path, errForeignSideFile, userName(uid), o.uid, o.gid, path)
}

// userName is "uid N (name)", or "uid N" when the user database does not
// name it.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// sideUsable says whether this process may record a command in the side
// files of store (the rule above): FILE.commands.lock and FILE.commands,
// where they exist, are regular files with one link made by someone who
// may use the store, and a file this process makes there would be usable
// by the store's owner and group. An error says why not, and the fix.
func sideUsable(store string) error {
	var errs []error
	for _, p := range []string{cmdFilePath(store) + ".lock", cmdFilePath(store)} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("the plan store's command file: %w", err))
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		if err := ownSideFile(st, p); err != nil {
			errs = append(errs, err)
		} else if err := trustedSide(st, store, p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return sideErrors(errs)
	}
	return sideFits(store)
}

// sideErrors is the refusal of one or both side files, on one line.
type sideErrors []error

func (e sideErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e sideErrors) Unwrap() []error { return e }

// ignoredSide says whether err, from reading FILE.commands, is one of
// a file never applied: made by another user, or a link.
func ignoredSide(err error) bool {
	return errors.Is(err, errForeignSideFile) || errors.Is(err, errNotSideFile) || errors.Is(err, syscall.ELOOP)
}

// dirOthersWrite says whether the store's directory lets other users
// make files in it (write bit for others), or cannot be read.
func dirOthersWrite(store string) bool {
	fi, err := os.Stat(filepath.Dir(store))
	return err != nil || fi.Mode().Perm()&0o002 != 0
}

// errNotSideFile: a side file's path names something else than a
// regular file of its own (a directory, a device, a FIFO, or a file
// with another name too: a hard link to someone else's file).
var errNotSideFile = errors.New("not a regular file with one link")

// checkSide returns the stat of the opened side file f, or an error
// naming it when it is not a regular file with one link.
func checkSide(f *os.File) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return &st, ownSideFile(&st, f.Name())
}

// ownSideFile refuses the side file at path (st its stat) when it is not
// a regular file with one link, saying what it is and the fix.
func ownSideFile(st *syscall.Stat_t, path string) error {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 {
		return fmt.Errorf("%s is %w (%s, mode %o, owner %s): it is not used and commands go to the store directly; "+
			"look at it (who made it?), then remove it (rm %s; it is made again as needed)",
			path, errNotSideFile, sideKind(st), st.Mode&0o7777, userName(int(st.Uid)), path)
	}
	return nil
}

// sideKind names what a side file's path names, for the operator.
func sideKind(st *syscall.Stat_t) string {
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return fmt.Sprintf("a file with %d links: a hard link to another file", st.Nlink)
	case syscall.S_IFDIR:
		return "a directory"
	case syscall.S_IFIFO:
		return "a FIFO"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFCHR, syscall.S_IFBLK:
		return "a device"
	}
	return "not a file"
}

// likeStore gives f, a side file of store, the store file's permission
// bits (when this process owns f, or is root) and owner (when this
// process is root), or only its group (when this process owns f and is
// a member of the store's group, as an operator of a store shared
// through a group is). It first checks that f is a regular file of its
// own (checkSide): it never gives a link's target away.
func likeStore(f *os.File, store string) error {
	st, err := checkSide(f)
	if err != nil {
		return err
	}
	o := ownerOf(store)
	if !o.known {
		return nil
	}
	euid := os.Geteuid()
	uid, gid := int(st.Uid), int(st.Gid)
	root, mine := euid == 0, uid == euid
	switch {
	case root && (uid != o.uid || gid != o.gid):
		if err := f.Chown(o.uid, o.gid); err != nil {
			return fmt.Errorf("give %s the plan store's owner (uid %d, gid %d): %w", f.Name(), o.uid, o.gid, err)
		}
		uid, gid = o.uid, o.gid
	case !root && mine && gid != o.gid && inGroup(o.gid):
		if err := f.Chown(-1, o.gid); err != nil {
			return fmt.Errorf("give %s the plan store's group (gid %d): %w", f.Name(), o.gid, err)
		}
		gid = o.gid
	}
	if !root && !mine {
		return nil // another's file: its owner gave it its mode
	}
	perm, err := sidePerm(o, uid, gid, store)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	if fs.FileMode(st.Mode).Perm() != perm {
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("give %s the plan store's mode (%v): %w", f.Name(), perm, err)
		}
	}
	return nil
}

// sidePerm is the mode a side file of store, owned by uid and group gid,
// needs so that everyone who may use the store may use it as they use
// the store: the store's mode, but for the file's group when it is not
// the store's (its members get nothing: they are not the store's); and
// for others, the bits of the store's owner when it reaches the file as
// "other" (not its owner, not a member of its group), and the bits of the
// store's group when the file is of another group (the store's group
// reaches it as "other"). Others get such bits only when the store's
// directory lets no other user in (dirClosed): they are then the store's
// owner and group, and no one else.
func sidePerm(o storeOwner, uid, gid int, store string) (fs.FileMode, error) {
	perm := o.perm
	var extra fs.FileMode
	if gid != o.gid {
		perm &^= 0o070
		extra |= (o.perm >> 3) & 0o7
	}
	if uid != o.uid && !userInGroup(o.uid, gid) {
		extra |= (o.perm >> 6) & 0o7
	}
	if extra&^perm == 0 {
		return perm, nil
	}
	if !dirClosed(store) {
		return 0, sideUnusable(o, uid, gid, store)
	}
	return perm | extra, nil
}

// errSideUnusable: a side file made by this process could not be made
// usable by everyone who may use the store without letting every other
// user in too.
var errSideUnusable = errors.New("a file made next to the plan store would be unusable by its users")

// sideUnusable is errSideUnusable for a file owned by uid and group gid,
// saying who could not use it, and the fixes.
func sideUnusable(o storeOwner, uid, gid int, store string) error {
	who := fmt.Sprintf("the store's owner (uid %d) is not a member of its group (gid %d)", o.uid, gid)
	if gid != o.gid {
		who = fmt.Sprintf("it could not be given the store's group (gid %d: uid %d is not a member)", o.gid, uid)
	}
	return fmt.Errorf("%w: %s, and %s lets other users in, so it would have to be open to every user: "+
		"add the store's owner (uid %d) to group %d, or close the directory to others (chmod o-rwx %s), or give the command as root (sudo)",
		errSideUnusable, who, filepath.Dir(store), o.uid, o.gid, filepath.Dir(store))
}

// sideFits says whether a side file this process makes next to store
// would be usable by everyone who may use the store (sidePerm), before it
// is made: the owner and group likeStore would give it (the store's when
// root; the store's group when this process is a member of it, else the
// directory's when it is set-group-ID, else this process's).
func sideFits(store string) error {
	o := ownerOf(store)
	euid := os.Geteuid()
	if !o.known || euid == 0 {
		return nil
	}
	gid := os.Getegid()
	if inGroup(o.gid) {
		gid = o.gid
	} else if fi, err := os.Stat(filepath.Dir(store)); err == nil && fi.Mode()&fs.ModeSetgid != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			gid = int(st.Gid)
		}
	}
	_, err := sidePerm(o, euid, gid, store)
	return err
}

// createSide is openSide(path, flag|O_CREATE) for a side file of store,
// which refuses (errSideUnusable) to make a file that is not there yet
// when it could not be made usable by everyone who may use the store.
func createSide(store, path string, flag int) (*os.File, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) || flag&os.O_EXCL != 0 {
		if err := sideFits(store); err != nil {
			return nil, err
		}
	}
	return openSide(path, flag|os.O_CREATE)
}

// userInGroup says whether user uid is a member of group gid (its
// primary group, or one of its others); false when it cannot be told.
func userInGroup(uid, gid int) bool {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return false
	}
	gs, err := u.GroupIds()
	return err == nil && slices.Contains(gs, strconv.Itoa(gid)) || u.Gid == strconv.Itoa(gid)
}

// dirClosed says whether the store's directory lets no other user in
// (no search bit for others).
func dirClosed(store string) bool {
	fi, err := os.Stat(filepath.Dir(store))
	return err == nil && fi.Mode().Perm()&0o001 == 0
}

// inGroup says whether this process is a member of group gid.
func inGroup(gid int) bool {
	if os.Getegid() == gid {
		return true
	}
	gs, err := os.Getgroups()
	return err == nil && slices.Contains(gs, gid)
}

// sideFileError is err, from opening a side file of store, with the fix
// when the side file belongs to another user (made by a command given
// as another user before rebootctl gave side files the store's owner),
// or is a symbolic link (never followed).
func sideFileError(store string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("the plan store's command file: %w: the files next to the store are never opened through a symbolic link; "+
			"remove the link (it is made again as needed)", err)
	}
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("the plan store's command file: %w", err)
	}
	o := ownerOf(store)
	return fmt.Errorf("the plan store's command file: %w: give the files next to the store the store's owner "+
		"(chown %d:%d %s*), or give the command as the store's owner (uid %d)", err, o.uid, o.gid, store, o.uid)
}
