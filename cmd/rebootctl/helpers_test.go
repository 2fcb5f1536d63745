package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/name (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = strings.ReplaceAll(got, os.TempDir(), "TMP")
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file (go test -tags e2e ./cmd/rebootctl -run TestGolden -update writes it)")
	assert.Equal(t, string(want), got, "golden %s", name)
}

func countStep(p plan.Plan, f func(plan.Reboot) bool) int {
	n := 0
	for _, r := range p.Reboots {
		if f(r) {
			n++
		}
	}
	return n
}
