package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// FileStore keeps each plan as one JSON document, <Dir>/<uuid>.json.
//
// Every write is compare-and-swap: a plan's Version is the SHA-256 of its
// file, and Put (under an exclusive lock on <Dir>/.lock, so that several
// processes may share the directory) writes only if the file still has
// that hash. It writes a temporary file, fsyncs it, renames it over the
// document and fsyncs the directory, so a crash leaves the old or the new
// document, never half of one.
//
// What it refuses to trust: a document that does not decode, whose uuid is
// not its file name, that is not a regular file (a FIFO would block a
// read forever), that cannot be read, or that is larger than
// MaxDocumentBytes is reported with ErrCorrupt (ErrTooLarge for size) by
// Get and List alike, and never overwritten.
type FileStore struct {
	Dir string
}

var _ Store = FileStore{}

func (s FileStore) path(uuid string) (string, error) {
	if err := ValidUUID(uuid); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, uuid+".json"), nil
}

// read returns the document's bytes, checking what it is before opening it.
func read(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrCorrupt, path, fi.Mode().Type())
	}
	if fi.Size() > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: %w: %s has %d bytes, limit %d", ErrCorrupt, ErrTooLarge, path, fi.Size(), MaxDocumentBytes)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: %w: %s over %d bytes", ErrCorrupt, ErrTooLarge, path, MaxDocumentBytes)
	}
	return data, nil
}

func version(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Get reads a plan and its version.
func (s FileStore) Get(_ context.Context, uuid string) (Plan, error) {
	path, err := s.path(uuid)
	if err != nil {
		return Plan{}, err
	}
	data, err := read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Plan{}, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	if err != nil {
		return Plan{}, err
	}
	p, err := Decode(data)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	if p.UUID != uuid {
		// Loading it would save it under the other UUID, over that plan.
		return Plan{}, fmt.Errorf("%w: %s holds plan %q", ErrCorrupt, path, p.UUID)
	}
	p.Version = version(data)
	return p, nil
}

// lock takes an exclusive lock on the directory's lock file.
func (s FileStore) lock() (func(), error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("plan: lock %s: %w", s.Dir, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// locked returns the plan's path with the directory lock held.
func (s FileStore) locked(uuid string) (string, func(), error) {
	path, err := s.path(uuid)
	if err != nil {
		return "", nil, err
	}
	unlock, err := s.lock()
	if err != nil {
		return "", nil, err
	}
	return path, unlock, nil
}

// Create stores a new plan: the UUID must be free and no server of p may
// be in another unfinished plan.
func (s FileStore) Create(ctx context.Context, p Plan) error {
	path, unlock, err := s.locked(p.UUID)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, p.UUID)
	}
	others, err := s.List(ctx)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if err := CheckOthers(p, others); err != nil {
		return err
	}
	return s.write(path, p)
}

// Put writes a plan if p.Version is the stored version. It refuses a
// write that changes the plan's servers, sets DryRun on an unfinished plan
// that is not a dry run (ErrDryRunSet), or makes the plan hold servers
// another unfinished plan holds (NewlyHolds).
func (s FileStore) Put(ctx context.Context, p Plan) error {
	path, unlock, err := s.locked(p.UUID)
	if err != nil {
		return err
	}
	defer unlock()
	data, err := read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s", ErrNotFound, p.UUID)
	case err != nil:
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	cur, derr := Decode(data)
	if derr != nil || cur.UUID != p.UUID {
		return fmt.Errorf("plan: refusing to overwrite %s: %w", path, ErrCorrupt)
	}
	if version(data) != p.Version {
		return fmt.Errorf("plan %s: %w", p.UUID, ErrConflict)
	}
	err = CheckPut(cur, p, func() ([]Plan, error) {
		others, err := s.List(ctx)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return others, nil
	})
	if err != nil {
		return err
	}
	return s.write(path, p)
}

func (s FileStore) write(path string, p Plan) error {
	data, err := Encode(p)
	if err != nil {
		return fmt.Errorf("plan: encode %s: %w", p.UUID, err)
	}
	tmp, err := os.CreateTemp(s.Dir, "."+p.UUID+".*.tmp")
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("plan: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("plan: fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	dir, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("plan: fsync %s: %w", s.Dir, err)
	}
	return nil
}

// List returns every plan that can be read, sorted by UUID, and an error
// wrapping ErrCorrupt naming those that cannot (with the good ones). Files
// whose name is not a valid plan UUID are reported too, not skipped: a plan
// that escapes List escapes the "server in another plan" checks.
func (s FileStore) List(ctx context.Context) ([]Plan, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	var plans []Plan
	var bad []string
	for _, e := range entries {
		name := e.Name()
		if name == ".lock" || strings.HasSuffix(name, ".tmp") && strings.HasPrefix(name, ".") {
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			if !e.IsDir() {
				bad = append(bad, name+" (not a plan file)")
			}
			continue
		}
		p, err := s.Get(ctx, strings.TrimSuffix(name, ".json"))
		if err != nil {
			bad = append(bad, name+": "+err.Error())
			continue
		}
		plans = append(plans, p)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].UUID < plans[j].UUID })
	if len(bad) > 0 {
		return plans, fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(bad, "; "))
	}
	return plans, nil
}
