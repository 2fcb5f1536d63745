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
// hostname or the path the file is given by. Its generation (and the one
// before it) is random too, made new by every Fleet.Advance: a copy of
// the file keeps the generation it had when it was copied.
var (
	bucketMeta  = []byte("meta")
	keyFleetID  = []byte("id")
	keyFleetGen = []byte("gen")
	keyPrevGen  = []byte("prev_gen")
)

// FleetIdentity names a fleet state file and tells a copy of it taken
// before from the file itself. ID is the file's (random, kept in it: a
// copy has the same). Gen is its generation: random, made new by every
// Fleet.Advance, "" until the first; PrevGen is the one before. The
// executor advances the generation at every pass and records it in its
// plan store's lease once the file has it: a file whose Gen or PrevGen is
// the lease's is the file the last executor used (PrevGen: it died
// between the two writes); a copy taken before that executor's last pass
// has neither.
type FleetIdentity struct {
	ID      string
	Gen     string
	PrevGen string
}

// ensureFleetID returns the identity kept in the state file of tx, giving
// the file an ID when it has none.
func ensureFleetID(tx *bolt.Tx) (FleetIdentity, error) {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return FleetIdentity{}, err
	}
	if id := b.Get(keyFleetID); len(id) > 0 {
		return readIdentity(b), nil
	}
	id, err := randomHex()
	if err != nil {
		return FleetIdentity{}, fmt.Errorf("inventory: random fleet state file ID: %w", err)
	}
	return FleetIdentity{ID: id}, b.Put(keyFleetID, []byte(id))
}

// readIdentity reads the identity kept in the meta bucket b.
func readIdentity(b *bolt.Bucket) FleetIdentity {
	return FleetIdentity{ID: string(b.Get(keyFleetID)), Gen: string(b.Get(keyFleetGen)), PrevGen: string(b.Get(keyPrevGen))}
}

func randomHex() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw[:]), nil
}

// ID is the fleet state file's ID (random, kept in the file: a copy of
// the file has the same ID).
func (f *Fleet) ID() string { return f.Identity().ID }

// Identity is the fleet state file's identity: its ID and its
// generations as last written.
func (f *Fleet) Identity() FleetIdentity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ident
}

// Advance gives the fleet state file a new generation (random), the one
// it had becoming its PrevGen, in one write, and returns the identity
// written.
func (f *Fleet) Advance() (FleetIdentity, error) {
	gen, err := randomHex()
	if err != nil {
		return FleetIdentity{}, fmt.Errorf("inventory: random fleet state file generation: %w", err)
	}
	f.mu.Lock()
	next := f.ident
	f.mu.Unlock()
	next.PrevGen, next.Gen = next.Gen, gen
	if err := f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := b.Put(keyFleetGen, []byte(next.Gen)); err != nil {
			return err
		}
		return b.Put(keyPrevGen, []byte(next.PrevGen))
	}); err != nil {
		return FleetIdentity{}, fmt.Errorf("inventory: advance the fleet state file's generation: %w", err)
	}
	f.mu.Lock()
	f.ident = next
	f.mu.Unlock()
	return next, nil
}

// ReadFleetID returns the ID kept in the fleet state file at path, read
// only (the file is neither made nor changed): "" when there is no file
// yet, or it is empty, or it has no ID (made by an older rebootkit; the
// next OpenFleet gives it one). The file is opened as OpenFleet opens it
// (never through a symbolic link; checkFile, when set, judges the file
// opened, as Options.CheckFile). ErrLocked: an open Fleet holds it.
func ReadFleetID(path string, checkFile func(*os.File) error) (string, error) {
	id, err := ReadFleetIdentity(path, checkFile)
	return id.ID, err
}

// ReadFleetIdentity is ReadFleetID with the file's generations
// (FleetIdentity).
func ReadFleetIdentity(path string, checkFile func(*os.File) error) (FleetIdentity, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		return FleetIdentity{}, nil
	}
	open := openStateFile
	if checkFile != nil {
		open = ownfile.CheckedOpener(ErrNotStateFile, "the fleet state file", checkFile)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second, OpenFile: open})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return FleetIdentity{}, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return FleetIdentity{}, fmt.Errorf("inventory: open %s: %w", path, err)
	}
	defer db.Close()
	var id FleetIdentity
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			id = readIdentity(b)
		}
		return nil
	})
	return id, err
}
