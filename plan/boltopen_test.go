package plan_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestOpenBoltRefusesLinks: a store path that is a symbolic link (to an
// empty file, which bbolt would make a database of), a second name of
// another file (a hard link) is refused before a byte is
// written (ErrNotStoreFile); the target keeps its size.
func TestOpenBoltRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	var fi os.FileInfo
	sym := filepath.Join(dir, "sym.db")
	require.NoError(t, os.Symlink(target, sym))
	hard := filepath.Join(dir, "hard.db")
	require.NoError(t, os.Link(target, hard))
	for _, p := range []string{sym, hard} {
		_, err := plan.OpenBolt(p)
		assert.ErrorIs(t, err, plan.ErrNotStoreFile, p)
	}
	_, err := plan.OpenBolt(dir)
	assert.Error(t, err, "a directory")
	fi, err = os.Stat(target)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "the link's target was written")
	s, err := plan.OpenBolt(filepath.Join(dir, "own.db")) // made here
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = plan.OpenBolt(filepath.Join(dir, "own.db")) // opened again
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
