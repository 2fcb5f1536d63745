// Package ownfile opens the bbolt files rebootkit keeps (the plan store,
// the inventory fleet's state file) as what their paths name, never
// through a symbolic link: such a file often lives in a directory that
// others may write (an operators' group), and a process running as root
// (the executor's unit, a command given with sudo) must never create or
// write a database in the file a link's owner chose.
package ownfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Opener returns an OpenFile for bbolt.Options: os.OpenFile that never
// follows a symbolic link (O_NOFOLLOW, so that O_CREATE never makes a
// link's target either) and refuses what is not a regular file with one
// link (a directory, a device, a FIFO, a hard link to another file)
// before bbolt reads or writes a byte of it (O_NONBLOCK: a FIFO there
// does not hang the open; it has no effect on a regular file's reads and
// writes). A refusal wraps notOwn and names the path; what names the
// file for the operator ("the store", "the fleet state file").
func Opener(notOwn error, what string) func(path string, flag int, perm os.FileMode) (*os.File, error) {
	return CheckedOpener(notOwn, what, nil)
}

// CheckedOpener is Opener, and then check (when not nil) judges the file
// opened (its descriptor: a name may be swapped or removed between a
// check of the path and the open) before bbolt reads or writes a byte of
// it; its error is returned as it is, and the file closed.
func CheckedOpener(notOwn error, what string, check func(*os.File) error) func(path string, flag int, perm os.FileMode) (*os.File, error) {
	return func(path string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link: give %s's own path", notOwn, path, what)
		}
		if err != nil {
			return nil, err
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return nil, err
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 {
			f.Close()
			return nil, fmt.Errorf("%w: %s (mode %o, %d links): give %s's own path", notOwn, path, st.Mode, st.Nlink, what)
		}
		if check != nil {
			if err := check(f); err != nil {
				f.Close()
				return nil, err
			}
		}
		return f, nil
	}
}
