package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// errForeignExecutorFile: the plan store or the fleet state file given to
// the executor was made by another user in a directory every user may
// make files in.
var errForeignExecutorFile = errors.New("another user's file in a directory every user may write")

// executorOwns refuses the file at path (what names it: "the plan store",
// "the fleet state file") when it exists, its owner is neither this
// process's user nor root, and its directory lets every user make files
// in it (dirOthersWrite): there any local user may make it before the
// executor's first start (a sticky /tmp, where no one else may remove
// it), and the executor would keep its plans or its power bookkeeping
// in a file that user may rewrite (ownfile.Opener takes any owner's). A
// file of another user in a directory others may not write was put
// there by someone who may write that directory, and is used. It looks
// at the path, for an early message before the executor claims the
// store; executorOwnsFile judges what each open opened.
func executorOwns(path, what string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return foreignExecutorFile(st, path, what)
}

// executorOwnsFile is executorOwns for the file opened at path, judged
// by its descriptor (fstat): the executor's opens of the plan store and
// of the fleet state file run it (plan.BoltOptions.Check,
// inventory.Options.CheckFile) before a byte is read, so that a file
// another user made, kept open and removed or renamed between
// executorOwns's look at the path and the open is refused too.
func executorOwnsFile(what string) func(*os.File) error {
	return func(f *os.File) error {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			return fmt.Errorf("%s %s: %w", what, f.Name(), err)
		}
		return foreignExecutorFile(&st, f.Name(), what)
	}
}

// foreignExecutorFile is executorOwns's judgement of the file at path
// whose stat is st.
func foreignExecutorFile(st *syscall.Stat_t, path, what string) error {
	if uid := int(st.Uid); uid == os.Geteuid() || uid == 0 || !dirOthersWrite(path) {
		return nil
	}
	return fmt.Errorf("%s %s is %w (its owner is %s, not this executor's user nor root, and %s lets every user make files in it): "+
		"the executor does not use it; look at it (who made it?), remove it (rm %s), and keep the executor's files in a directory only its users may write",
		what, path, errForeignExecutorFile, userName(int(st.Uid)), filepath.Dir(path), path)
}
