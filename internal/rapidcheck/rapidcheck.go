// Package rapidcheck runs rapid property tests so that a committed failure
// file that no longer replays fails the test instead of being skipped with
// a log line.
//
// rapid replays every file under testdata/rapid/<TestName>/ before it draws
// new cases, but when a file no longer fits the test's draws (the test was
// changed) or was written by another rapid version, rapid only logs it and
// goes on: the regression the file pinned is silently unguarded. Check makes
// that a test failure. Regenerate such a file by running the test against
// the mutant it pinned, or delete it and say why in the commit.
package rapidcheck

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// tb passes everything to the test and notes rapid's complaints about
// failure files.
type tb struct {
	*testing.T
	stale []string
}

func (w *tb) Logf(format string, args ...any) {
	w.T.Helper()
	w.note(fmt.Sprintf(format, args...))
	w.T.Logf(format, args...)
}

func (w *tb) Log(args ...any) {
	w.T.Helper()
	w.note(fmt.Sprint(args...))
	w.T.Log(args...)
}

func (w *tb) note(msg string) {
	if strings.Contains(msg, "[rapid]") &&
		(strings.Contains(msg, "is no longer valid") || strings.Contains(msg, "ignoring fail file")) {
		w.stale = append(w.stale, msg)
	}
}

// Check is rapid.Check that also fails t when a committed failure file of
// this test cannot be replayed.
func Check(t *testing.T, prop func(*rapid.T)) {
	t.Helper()
	w := &tb{T: t}
	rapid.Check(w, prop)
	for _, msg := range w.stale {
		t.Errorf("a committed rapid failure file does not replay, so the regression it pinned is unguarded: %s", msg)
	}
}
