package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The side files of the store (FILE.commands, FILE.commands.lock,
// FILE.wait) are made by whoever gives a command: an operator with sudo
// as often as the service user the executor runs as (a systemd unit with
// User=), who owns the store. A side file root made for itself, mode
// 0600, would keep the executor from its store for good (it opens
// FILE.commands.lock before every read and write). So every side file
// gets the store file's owner (when made as root, who may give it) and
// permission bits.

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

// likeStore gives f, a side file of store, the store file's permission
// bits (when this process owns f, or is root) and owner (when this
// process is root). Run as another user, it leaves f's owner as it is.
func likeStore(f *os.File, store string) error {
	o := ownerOf(store)
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !o.known {
		return nil
	}
	root := os.Geteuid() == 0
	if root && (int(st.Uid) != o.uid || int(st.Gid) != o.gid) {
		if err := f.Chown(o.uid, o.gid); err != nil {
			return fmt.Errorf("give %s the plan store's owner (uid %d, gid %d): %w", f.Name(), o.uid, o.gid, err)
		}
	}
	if fi.Mode().Perm() != o.perm && (root || int(st.Uid) == os.Geteuid()) {
		if err := f.Chmod(o.perm); err != nil {
			return fmt.Errorf("give %s the plan store's mode (%v): %w", f.Name(), o.perm, err)
		}
	}
	return nil
}

// sideFileError is err, from opening a side file of store, with the fix
// when the side file belongs to another user (made by a command given
// as another user before rebootctl gave side files the store's owner).
func sideFileError(store string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("the plan store's command file: %w", err)
	}
	o := ownerOf(store)
	return fmt.Errorf("the plan store's command file: %w: give the files next to the store the store's owner "+
		"(chown %d:%d %s*), or give the command as the store's owner (uid %d)", err, o.uid, o.gid, store, o.uid)
}
