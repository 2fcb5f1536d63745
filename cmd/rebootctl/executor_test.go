package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRefusesMissingStore: every command but plan create refuses a store
// that does not exist, says so, and does not create an empty one (an
// executor or a watch started in another directory must not look at an
// empty store of its own) (issue 26, B7).
func TestRefusesMissingStore(t *testing.T) {
	l := newLab(t, 2, 0)
	missing := filepath.Join(l.dir, "elsewhere", "..", "typo.db")
	for _, args := range [][]string{
		{"plan", "list"},
		{"plan", "show", "p1"},
		{"plan", "watch", "p1"},
		{"plan", "run", "p1"},
		{"plan", "stop", "p1"},
		{"plan", "cancel", "p1"},
		{"executor"},
	} {
		_, errs, code := l.ctl(append(args, "--store", missing)...)
		assert.Equal(t, exitError, code, "%v: %s", args, errs)
		assert.Contains(t, errs, "does not exist", args)
		_, err := os.Stat(missing)
		assert.ErrorIs(t, err, os.ErrNotExist, "%v created the store", args)
	}
}
