// Package scenario runs scenario files: stories of commands, each block
// followed by a line "----" and the output its commands print, blocks
// separated by blank lines. Lines starting with '#' are comments. With
// rewrite, the expected output is replaced by what was printed (review the
// diff before committing). It is shared by the packages' tests.
package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs every file matching glob as a subtest; each file gets a fresh
// exec from newExec, which runs one command line and writes its output.
func Run(t *testing.T, glob string, rewrite bool, newExec func() func(line string, out *strings.Builder) error) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files match %s: %v", glob, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runFile(t, f, rewrite, newExec()) })
	}
}

type block struct{ cmds, want string }

func parse(raw string) ([]block, bool) {
	var blocks []block
	var cur block
	inOut := false
	for _, line := range strings.Split(raw, "\n") {
		switch {
		case !inOut && line == "----":
			inOut = true
		case !inOut:
			cur.cmds += line + "\n"
		case line == "":
			blocks = append(blocks, cur)
			cur, inOut = block{}, false
		default:
			cur.want += line + "\n"
		}
	}
	if inOut {
		blocks = append(blocks, cur)
	} else if strings.TrimSpace(cur.cmds) != "" {
		return blocks, false
	}
	return blocks, true
}

func runFile(t *testing.T, path string, rewrite bool, exec func(string, *strings.Builder) error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, ok := parse(string(raw))
	if !ok {
		t.Fatalf("%s: last block has no ---- line", path)
	}
	var out strings.Builder
	for i, b := range blocks {
		var got strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(b.cmds), "\n") {
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			if err := exec(line, &got); err != nil {
				t.Fatalf("%s: block %d: %q: %v", path, i+1, line, err)
			}
		}
		if !rewrite && got.String() != b.want {
			t.Errorf("%s: block %d:\n%s\ngot:\n%s\nwant:\n%s", path, i+1, b.cmds, got.String(), b.want)
		}
		if i > 0 {
			out.WriteString("\n")
		}
		out.WriteString(b.cmds + "----\n" + got.String())
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
