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
//
// A newcomer's "go test ./..." stays quick: unless told otherwise, Check
// draws QuickChecks cases per property instead of rapid's 100 (CheckQuick:
// fewer, for a property whose cases take seconds each). CI (.ci/run)
// sets REBOOTKIT_LONG=1 for rapid's default; -rapid.checks or RAPID_CHECKS
// choose the count explicitly. Committed failure files replay either way.
//
// A failing run leaves a new failure file behind; Check then says where it
// is and what to do with it, so that a developer who meets a red run
// locally knows the file will replay on every later run until it is dealt
// with.
package rapidcheck

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// QuickChecks is how many cases a property draws in a quick run.
const QuickChecks = 20

// LongEnv is the environment variable that asks for the long runs
// (rapid's default count), as CI does.
const LongEnv = "REBOOTKIT_LONG"

var (
	quickOnce sync.Once
	isQuick   bool // a quick run: quick set rapid.checks to QuickChecks
)

// checksFor returns the rapid.checks value a run should set, and whether
// to set it: QuickChecks unless the long runs are asked for (LongEnv) or
// the count was chosen (the RAPID_CHECKS variable, the -rapid.checks
// flag).
func checksFor(lookup func(string) (string, bool), flagGiven bool) (int, bool) {
	if v, ok := lookup(LongEnv); ok && v != "" && v != "0" {
		return 0, false
	}
	if _, ok := lookup("RAPID_CHECKS"); ok || flagGiven {
		return 0, false
	}
	return QuickChecks, true
}

// quick sets rapid's check count for a quick run, once per test binary.
func quick() {
	quickOnce.Do(func() {
		given := false
		flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
		if n, ok := checksFor(os.LookupEnv, given); ok {
			_ = flag.Set("rapid.checks", strconv.Itoa(n))
			isQuick = true
		}
	})
}

// Check is rapid.Check that also fails t when a committed failure file of
// this test cannot be replayed. In a quick run it draws QuickChecks cases
// (see the package doc).
func Check(t *testing.T, prop func(*rapid.T)) {
	t.Helper()
	quick()
	w := &tb{T: t}
	before := failFiles(t.Name())
	// rapid stops a failing test with t.Fatal, so the message about a new
	// failure file is given from a cleanup.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, f := range failFiles(t.Name()) {
			if !slices.Contains(before, f) {
				if abs, err := filepath.Abs(f); err == nil {
					f = abs
				}
				t.Logf("rapid saved this failing case to %s; it replays first on every run of %s until it is removed.\n"+
					"  If the failure is a real bug: fix it, pad the file (go run github.com/rebootkit/rebootkit/internal/rapidcheck/padfail %s) and commit it as a regression.\n"+
					"  If it came from a broken test or oracle: fix that and keep the file if it still replays, or delete it and say why in the commit.\n"+
					"  To draw new random cases without replaying it: -rapid.nofailfile.", f, t.Name(), f)
			}
		}
	})
	rapid.Check(w, prop)
	for _, msg := range w.stale {
		t.Errorf("a committed rapid failure file does not replay, so the regression it pinned is unguarded: %s", msg)
	}
}

// CheckQuick is Check for a property whose cases are slow (seconds of
// real time each): a quick run draws n of them (at most QuickChecks)
// instead of QuickChecks; a long run (LongEnv) or a chosen count draws
// as many as Check. It sets rapid's global count for the duration of the
// check: not for tests that run in parallel with other rapid checks.
func CheckQuick(t *testing.T, n int, prop func(*rapid.T)) {
	t.Helper()
	quick()
	if isQuick && n < QuickChecks {
		_ = flag.Set("rapid.checks", strconv.Itoa(max(n, 1)))
		defer func() { _ = flag.Set("rapid.checks", strconv.Itoa(QuickChecks)) }()
	}
	Check(t, prop)
}

// failFiles lists the failure files rapid keeps for test name.
func failFiles(name string) []string {
	dir := filepath.Join("testdata", "rapid", name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".fail") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
