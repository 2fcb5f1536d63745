package inventory

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
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
