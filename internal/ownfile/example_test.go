package ownfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rebootkit/rebootkit/internal/ownfile"
)

var errNotMine = errors.New("not the file's own path")

func ExampleOpener() {
	dir, _ := os.MkdirTemp("", "ownfile")
	defer os.RemoveAll(dir)
	open := ownfile.Opener(errNotMine, "the state file")
	target := filepath.Join(dir, "elsewhere")
	link := filepath.Join(dir, "state.db")
	_ = os.Symlink(target, link)
	_, err := open(link, os.O_RDWR|os.O_CREATE, 0o600)
	_, serr := os.Lstat(target)
	fmt.Println(errors.Is(err, errNotMine), errors.Is(serr, os.ErrNotExist))
	f, err := open(filepath.Join(dir, "own.db"), os.O_RDWR|os.O_CREATE, 0o600)
	fmt.Println(err)
	f.Close()
	// Output:
	// true true
	// <nil>
}
