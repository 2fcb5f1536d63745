package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestJSONHonouredOrRefused (issue 38, point 16): --json does what each
// command's help says or is refused. Old code: every command listed
// "-json print JSON for scripts", and executor, watch and report ignored
// it (watch drew its text view, the executor logged text, report wrote
// its HTML and said so in words).
func TestJSONHonouredOrRefused(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "plans.db")
	st, err := plan.OpenBolt(store)
	require.NoError(t, err)
	p, _, err := plan.Create([]plan.Server{{UUID: "s1", Hostname: "cn1", Platform: "1"}, {UUID: "s2", Hostname: "cn2", Platform: "1"}},
		plan.CreateOptions{UUID: "p1", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1)})
	require.NoError(t, err)
	require.NoError(t, st.Create(context.Background(), p))
	_, err = plan.Command(context.Background(), st, "p1", plan.Cancel)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	ctl := func(args ...string) (string, string, int) {
		var out, errw bytes.Buffer
		code := run(context.Background(), append(args, "--store", store, "--inventory", filepath.Join(dir, "none.yaml")), &out, &errw)
		return out.String(), errw.String(), code
	}

	out, errs, code := ctl("plan", "watch", "--json", "p1")
	assert.Equal(t, exitCanceled, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, out)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &doc), "watch --json prints JSON lines: %s", out)
	assert.Equal(t, "canceled", doc["state"])
	assert.Equal(t, 2.0, doc["total"])

	for _, cmd := range [][]string{{"plan", "report", "--json", "p1"}, {"plan", "abandon", "--json", "p1", "cn1"}} {
		_, errs, code = ctl(cmd...)
		assert.Equal(t, exitUsage, code, "%v: --json is refused, not ignored", cmd)
		assert.Contains(t, errs, "-json", cmd)
	}
	_, errs, _ = ctl("executor", "-h")
	assert.Contains(t, errs, "log as JSON lines", "the executor says what --json does")

	var buf bytes.Buffer
	executorLogger(&buf, true, true).Info("power command accepted", "server", "cn1")
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc), buf.String())
	assert.Equal(t, "cn1", doc["server"])
	buf.Reset()
	executorLogger(&buf, false, false).Info("hidden")
	assert.Empty(t, buf.String(), "without -v, Info is not logged")
}
