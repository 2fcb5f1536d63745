package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestQuickSuiteRunsNoEndToEnd: a plain "go test ./..." stays quick for a
// newcomer: every test file that builds or runs the rebootctl binary (its
// executor against emulated BMCs, tmux, Chromium) carries the e2e build
// tag, which .ci/run sets (issue 38, 17; old code: cmd/rebootctl alone
// took 141 s of CPU in a plain run).
func TestQuickSuiteRunsNoEndToEnd(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(raw)
		if strings.HasPrefix(src, "//go:build e2e\n") {
			continue
		}
		for _, heavy := range []string{"exec.Command(binary", "exec.CommandContext(ctx, binary", "newLab(", "func TestMain("} {
			if strings.Contains(src, heavy) && f != "quick_test.go" {
				t.Errorf("%s has %q but no //go:build e2e line: it makes a plain go test ./... slow", f, heavy)
			}
		}
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^go test -race -count=1 .*-tags e2e \./\.\.\.$`).Match(ci) {
		t.Error(".ci/run does not run the end-to-end tests (-tags e2e)")
	}
}
