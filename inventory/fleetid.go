package inventory

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/rebootkit/rebootkit/internal/ownfile"
)

// The fleet state file's ID: random, made at the file's first open by an
// OpenFleet that knows of it (a file made before has none until then),
// and kept in the file, so that it names this file whatever the machine's
// hostname or the path the file is given by.
var (
	bucketMeta = []byte("meta")
	keyFleetID = []byte("id")
)

// ensureFleetID returns the ID kept in the state file of tx, giving the
// file one when it has none.
func ensureFleetID(tx *bolt.Tx) (string, error) {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return "", err
	}
	if id := b.Get(keyFleetID); len(id) > 0 {
		return string(id), nil
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("inventory: random fleet state file ID: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	return id, b.Put(keyFleetID, []byte(id))
}

// ID is the fleet state file's ID (random, kept in the file: a copy of
// the file has the same ID).
func (f *Fleet) ID() string { return f.id }

// ReadFleetID returns the ID kept in the fleet state file at path, read
// only (the file is neither made nor changed): "" when there is no file
// yet, or it is empty, or it has no ID (made by an older rebootkit; the
// next OpenFleet gives it one). The file is opened as OpenFleet opens it
// (never through a symbolic link; checkFile, when set, judges the file
// opened, as Options.CheckFile). ErrLocked: an open Fleet holds it.
func ReadFleetID(path string, checkFile func(*os.File) error) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		return "", nil
	}
	open := openStateFile
	if checkFile != nil {
		open = ownfile.CheckedOpener(ErrNotStateFile, "the fleet state file", checkFile)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second, OpenFile: open})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return "", fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return "", fmt.Errorf("inventory: open %s: %w", path, err)
	}
	defer db.Close()
	var id string
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			id = string(b.Get(keyFleetID))
		}
		return nil
	})
	return id, err
}
