package plan

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrNotStoreFile: the store's path names something else than a regular
// file of its own (a symbolic link, a directory, a device, or a file with
// another name too): a store is opened as what its path names, never
// through a link, so that a command given as root (sudo) never writes a
// bbolt database into the file a link's owner chose.
var ErrNotStoreFile = errors.New("plan: the store's path is not a regular file with one link")

// openStoreFile is bbolt's OpenFile for OpenBolt: os.OpenFile that never
// follows a symbolic link (O_NOFOLLOW) and refuses what is not a regular
// file with one link, before bbolt reads or writes a byte of it
// (O_NONBLOCK: a FIFO there does not hang the open; it has no effect on
// a regular file's reads and writes).
func openStoreFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link: give the store's own path", ErrNotStoreFile, path)
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
		return nil, fmt.Errorf("%w: %s (mode %o, %d links): give the store's own path", ErrNotStoreFile, path, st.Mode, st.Nlink)
	}
	return f, nil
}
