package plan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FileStore keeps each plan as one JSON document, <Dir>/<uuid>.json. Put
// writes a temporary file, fsyncs it, renames it over the document and
// fsyncs the directory, so a crash leaves the old or the new document,
// never half of one. A document that does not decode is reported with
// ErrCorrupt and never overwritten: Put refuses to replace it.
type FileStore struct {
	Dir string
}

var _ Store = FileStore{}

func (s FileStore) path(uuid string) (string, error) {
	if uuid == "" || strings.ContainsAny(uuid, `/\`) || uuid == "." || uuid == ".." {
		return "", fmt.Errorf("plan: invalid plan uuid %q", uuid)
	}
	return filepath.Join(s.Dir, uuid+".json"), nil
}

// Get reads a plan.
func (s FileStore) Get(_ context.Context, uuid string) (Plan, error) {
	path, err := s.path(uuid)
	if err != nil {
		return Plan{}, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Plan{}, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("plan: read %s: %w", path, err)
	}
	p, err := Decode(data)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return p, nil
}

// Put writes a plan atomically and durably.
func (s FileStore) Put(ctx context.Context, p Plan) error {
	path, err := s.path(p.UUID)
	if err != nil {
		return err
	}
	if _, err := s.Get(ctx, p.UUID); errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	data, err := Encode(p)
	if err != nil {
		return fmt.Errorf("plan: encode %s: %w", p.UUID, err)
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("plan: %w", err)
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

// List returns every plan that decodes, sorted by UUID, and an error
// wrapping ErrCorrupt naming those that do not (with the good ones).
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
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		p, err := s.Get(ctx, strings.TrimSuffix(name, ".json"))
		if err != nil {
			bad = append(bad, name)
			continue
		}
		plans = append(plans, p)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].UUID < plans[j].UUID })
	if len(bad) > 0 {
		return plans, fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(bad, ", "))
	}
	return plans, nil
}
