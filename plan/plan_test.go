package plan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = fake.Epoch

func servers(core, rest int) []plan.Server {
	var out []plan.Server
	for i := 0; i < core+rest; i++ {
		s := plan.Server{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "20150101T000000Z"}
		if i < core {
			s.Core = true
			s.Hostname = fmt.Sprintf("core%d", i)
		}
		if i == core-1 {
			s.Headnode, s.Hostname = true, "headnode"
		}
		out = append(out, s)
	}
	return out
}

func opts() plan.CreateOptions {
	return plan.CreateOptions{UUID: "p1", Target: "20150901T000000Z", Select: plan.SelectAll, Concurrency: plan.Count(2)}
}

func TestCreateOrderAndSelection(t *testing.T) {
	p, warns, err := plan.Create(servers(3, 4), opts())
	require.NoError(t, err)
	assert.Empty(t, warns)
	var order []string
	for _, r := range p.Reboots {
		order = append(order, r.ServerHostname)
	}
	assert.Equal(t, []string{"headnode", "core0", "core1", "cn003", "cn004", "cn005", "cn006"}, order,
		"core first, the headnode first among them")
	assert.Equal(t, plan.StateCreated, p.State)

	o := opts()
	o.Select = plan.SelectCore
	p, _, _ = plan.Create(servers(3, 4), o)
	assert.Len(t, p.Reboots, 3)
	o.Select = plan.SelectNonCore
	p, _, _ = plan.Create(servers(3, 4), o)
	assert.Len(t, p.Reboots, 4)
	o.Select, o.Servers = plan.SelectList, []string{"cn004", "u003"}
	p, _, err = plan.Create(servers(3, 4), o)
	require.NoError(t, err)
	assert.Equal(t, "cn003", p.Reboots[0].ServerHostname)
}

func TestCreateValidation(t *testing.T) {
	fleet := servers(1, 3)
	tests := []struct {
		name string
		mod  func(o *plan.CreateOptions)
		want error
	}{
		{"unknown server", func(o *plan.CreateOptions) { o.Select, o.Servers = plan.SelectList, []string{"nope"} }, plan.ErrUnknownServer},
		{"duplicate", func(o *plan.CreateOptions) { o.Select, o.Servers = plan.SelectList, []string{"u001", "cn001"} }, plan.ErrDuplicateServer},
		{"concurrency 0", func(o *plan.CreateOptions) { o.Concurrency = plan.Count(0) }, plan.ErrConcurrency},
		{"concurrency -1%", func(o *plan.CreateOptions) { o.Concurrency = plan.Percent(-1) }, plan.ErrConcurrency},
		{"no uuid", func(o *plan.CreateOptions) { o.UUID = "" }, plan.ErrNoUUID},
		{"in other plan", func(o *plan.CreateOptions) {
			o.Existing = []plan.Plan{{UUID: "other", State: plan.StateRunning, Concurrency: 1, Reboots: []plan.Reboot{{ServerUUID: "u002"}}}}
		}, plan.ErrInOtherPlan},
	}
	for _, tt := range tests {
		o := opts()
		tt.mod(&o)
		_, _, err := plan.Create(fleet, o)
		assert.ErrorIs(t, err, tt.want, tt.name)
	}
	// A finished plan does not hold its servers.
	o := opts()
	o.Existing = []plan.Plan{{UUID: "old", State: plan.StateComplete, Concurrency: 1, Reboots: []plan.Reboot{{ServerUUID: "u002", Step: plan.StepDone}}}}
	_, _, err := plan.Create(fleet, o)
	assert.NoError(t, err)
	// 10% of 4 rounds down to 0, then up to the minimum of 1.
	o = opts()
	o.Concurrency = plan.Percent(10)
	p, _, err := plan.Create(fleet, o)
	require.NoError(t, err)
	assert.Equal(t, 1, p.Concurrency)
}

// The seed's ignore-warnings and skip-current options: servers already on
// the target and downgrades warn and refuse, unless ignored or skipped.
func TestCreateWarnings(t *testing.T) {
	fleet := servers(0, 3)
	fleet[0].Platform = "20150901T000000Z" // already on target
	fleet[1].Platform = "20151001T000000Z" // newer: a downgrade
	_, warns, err := plan.Create(fleet, opts())
	assert.ErrorIs(t, err, plan.ErrWarnings)
	require.Len(t, warns, 2)
	assert.Equal(t, plan.WarnAlreadyCurrent, warns[0].Kind)
	assert.Equal(t, plan.WarnDowngrade, warns[1].Kind)

	o := opts()
	o.IgnoreWarnings = true
	p, _, err := plan.Create(fleet, o)
	require.NoError(t, err)
	assert.Len(t, p.Reboots, 3)

	o = opts()
	o.SkipCurrent = true
	_, warns, err = plan.Create(fleet, o)
	assert.ErrorIs(t, err, plan.ErrWarnings, "skip-current skips current servers, not downgrades")
	assert.Len(t, warns, 1)

	o.DryRun, o.IgnoreWarnings = true, true
	p, _, err = plan.Create(fleet, o)
	require.NoError(t, err)
	assert.True(t, p.DryRun)
	assert.Len(t, p.Reboots, 2)
}

func TestComparePlatforms(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"9", "10", -1},
		{"1.10.0", "1.9.3", 1},
		{"20150901T012345Z", "20151001T000000Z", -1},
		{"20150901T012345Z", "20150901T012345Z", 0},
		{"1.2", "1.2.1", -1},
		{"1.2-rc1", "1.2-rc2", -1},
		{"v2", "v10", -1},
	}
	for i, tt := range tests {
		if got := plan.ComparePlatforms(tt.a, tt.b); got != tt.want {
			t.Errorf("step %d: Compare(%q, %q) = %d, want %d", i, tt.a, tt.b, got, tt.want)
		}
		if got := plan.ComparePlatforms(tt.b, tt.a); got != -tt.want {
			t.Errorf("step %d: not antisymmetric", i)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	p, _, err := plan.Create(servers(2, 3), opts())
	require.NoError(t, err)
	ts := t0.Add(90 * time.Second)
	p.Reboots[0].StartedAt, p.Reboots[0].JobUUID, p.Reboots[0].Step = &ts, "j", plan.StepJob
	data, err := plan.Encode(p)
	require.NoError(t, err)
	back, err := plan.Decode(data)
	require.NoError(t, err)
	if d := cmp.Diff(p, back); d != "" {
		t.Fatal(d)
	}
	again, _ := plan.Encode(back)
	assert.Equal(t, string(data), string(again), "byte-for-byte stable")

	for _, bad := range []string{`{"uuid":"x","state":"running","concurrency":1,"reboots":[],"extra":1}`,
		`{"uuid":"x","state":"sleeping","concurrency":1,"reboots":[]}`,
		`{"uuid":"x","state":"running","concurrency":0,"reboots":[]}`,
		`{"uuid":"x","state":"running","concurrency":1,"reboots":[]} {}`,
		`{"uuid":"x","state":"running","concurrency":1,"reboots":[{"server_uuid":"a"},{"server_uuid":"a"}]}`,
	} {
		_, err := plan.Decode([]byte(bad))
		assert.ErrorIs(t, err, plan.ErrDecode, bad)
	}
}

func TestFileStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := plan.FileStore{Dir: dir}
	_, err := s.Get(ctx, "p1")
	assert.ErrorIs(t, err, plan.ErrNotFound)
	p, _, _ := plan.Create(servers(1, 2), opts())
	require.NoError(t, s.Create(ctx, p))
	assert.ErrorIs(t, s.Create(ctx, p), plan.ErrExists, "a UUID is taken once")
	got, err := s.Get(ctx, "p1")
	require.NoError(t, err)
	assert.NotEmpty(t, got.Version)
	p.Version = got.Version
	assert.Equal(t, p, got)

	// A corrupt document is reported and never overwritten.
	path := filepath.Join(dir, "p1.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"uuid": "p1", trunc`), 0o644))
	_, err = s.Get(ctx, "p1")
	assert.ErrorIs(t, err, plan.ErrCorrupt)
	assert.ErrorIs(t, s.Put(ctx, p), plan.ErrCorrupt)
	raw, _ := os.ReadFile(path)
	assert.Equal(t, `{"uuid": "p1", trunc`, string(raw))
	plans, err := s.List(ctx)
	assert.ErrorIs(t, err, plan.ErrCorrupt)
	assert.Empty(t, plans)
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2, "no temporary files left behind (the plan and the lock file)")
	assert.Error(t, s.Put(ctx, plan.Plan{UUID: "../escape", State: plan.StateCreated, Concurrency: 1}))
}

func TestRunStopCancelTransitions(t *testing.T) {
	p, _, _ := plan.Create(servers(1, 2), opts())
	p, err := plan.Run(p)
	require.NoError(t, err)
	p, err = plan.Stop(p)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, p.State)
	p, err = plan.Run(p)
	require.NoError(t, err)
	p, err = plan.Cancel(p)
	require.NoError(t, err)
	_, err = plan.Run(p)
	assert.ErrorIs(t, err, plan.ErrState)
	_, err = plan.Cancel(p)
	assert.True(t, errors.Is(err, plan.ErrState))
}

func TestMayRebootOutside(t *testing.T) {
	p, _, _ := plan.Create(servers(1, 2), opts())
	ok, _ := plan.MayRebootOutside([]plan.Plan{p}, "u001", "")
	assert.False(t, ok, "refused while the plan is unfinished")
	ok, _ = plan.MayRebootOutside([]plan.Plan{p}, "u001", "p1")
	assert.True(t, ok, "unless the plan asks")
	ok, _ = plan.MayRebootOutside([]plan.Plan{p}, "elsewhere", "")
	assert.True(t, ok)
	p.State = plan.StateComplete
	ok, _ = plan.MayRebootOutside([]plan.Plan{p}, "u001", "")
	assert.True(t, ok)
}

func TestJobUUIDStable(t *testing.T) {
	p := plan.Plan{UUID: "p"}
	a, b := plan.JobUUID(p, "s"), plan.JobUUID(p, "s")
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, plan.JobUUID(p, "t"))
	// Another plan with the same UUID (created at another time) gets other
	// jobs: its reboots are never answered by the first plan's jobs.
	later := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	assert.NotEqual(t, a, plan.JobUUID(plan.Plan{UUID: "p", CreatedAt: &later}, "s"))
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, a)
}
