package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestFleetIDKeptInFile (review 37 round 23): the fleet state file's ID
// is kept in the file: the same at every open, whatever the path it is
// opened by; a file made before (no ID) gets one at its first open; Claim
// gets it before any job resumes, and its error is OpenFleet's. Ground
// truth: the ID read from the file itself with bbolt.
func TestFleetIDKeptInFile(t *testing.T) {
	inv, err := Parse([]byte(good))
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.db")
	// A file as an older rebootctl made it: its buckets, no ID.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketHosts} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())

	got, err := ReadFleetID(path, nil)
	require.NoError(t, err)
	assert.Empty(t, got, "a file of an older rebootkit has no ID")
	got, err = ReadFleetID(filepath.Join(dir, "none.db"), nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NoFileExists(t, filepath.Join(dir, "none.db"), "ReadFleetID makes no file")

	var claimed []string
	open := func(p string) *Fleet {
		f, err := OpenFleet(inv, p, Options{manual: true, Claim: func(id FleetIdentity) error {
			claimed = append(claimed, id.ID)
			return nil
		}})
		require.NoError(t, err)
		return f
	}
	f := open(path)
	id := f.ID()
	require.NoError(t, f.Close())
	assert.Len(t, id, 32)
	db, err = bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		assert.Equal(t, id, string(tx.Bucket(bucketMeta).Get(keyFleetID)), "the ID is kept in the file")
		return nil
	}))
	require.NoError(t, db.Close())
	got, err = ReadFleetID(path, nil)
	require.NoError(t, err)
	assert.Equal(t, id, got)

	// Through another path (a link to its directory): the same ID.
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	f = open(filepath.Join(link, "fleet.db"))
	assert.Equal(t, id, f.ID())
	require.NoError(t, f.Close())
	assert.Equal(t, []string{id, id}, claimed)

	// Another file: another ID.
	f = open(filepath.Join(dir, "other.db"))
	assert.NotEqual(t, id, f.ID())
	require.NoError(t, f.Close())

	// Claim refuses: OpenFleet fails with its error, the file is closed.
	refuse := errors.New("refused")
	_, err = OpenFleet(inv, path, Options{manual: true, Claim: func(FleetIdentity) error { return refuse }})
	assert.ErrorIs(t, err, refuse)
	f = open(path)
	require.NoError(t, f.Close())
}
