package plan

import (
	"errors"

	"github.com/rebootkit/rebootkit/internal/ownfile"
)

// ErrNotStoreFile: the store's path names something else than a regular
// file of its own (a symbolic link, a directory, a device, or a file with
// another name too): a store is opened as what its path names, never
// through a link, so that a command given as root (sudo) never writes a
// bbolt database into the file a link's owner chose.
var ErrNotStoreFile = errors.New("plan: the store's path is not a regular file with one link")

// openStoreFile is bbolt's OpenFile for OpenBolt: never through a
// symbolic link, and only a regular file with one link (ownfile.Opener,
// shared with the inventory fleet's state file).
var openStoreFile = ownfile.Opener(ErrNotStoreFile, "the store")
