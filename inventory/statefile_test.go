package inventory

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenFleetRefusesLinkedStateFile: the fleet state file is never
// opened through a symbolic link, nor as a hard link to another file
// (ownfile.Opener): OpenFleet refuses with ErrNotStateFile, and the
// link's target is neither made nor written (review 37 round 20).
func TestOpenFleetRefusesLinkedStateFile(t *testing.T) {
	inv, err := Parse([]byte(good))
	require.NoError(t, err)
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	sym := filepath.Join(dir, "fleet.db")
	require.NoError(t, os.Symlink(target, sym))
	_, err = OpenFleet(inv, sym, Options{})
	assert.ErrorIs(t, err, ErrNotStateFile)
	_, serr := os.Lstat(target)
	assert.ErrorIs(t, serr, os.ErrNotExist, "the link's target was made")

	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o600))
	hard := filepath.Join(dir, "fleet2.db")
	require.NoError(t, os.Link(other, hard))
	_, err = OpenFleet(inv, hard, Options{})
	assert.ErrorIs(t, err, ErrNotStateFile)
	b, rerr := os.ReadFile(other)
	require.NoError(t, rerr)
	assert.Equal(t, "x", string(b), "the hard link's file was written")
}
