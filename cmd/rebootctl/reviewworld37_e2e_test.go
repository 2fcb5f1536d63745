//go:build e2e

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// The review-37 end-to-end worlds: 100,000-server plans in a bbolt store
// for the latency tests, and a store shared through a group for the tests
// that run the rebootctl binary as other users.

// bigServers is n fake servers, u%06d and cn%06d, whose steps take
// 5-20 s each (a boot a minute).
func bigServers(n int) []fake.FleetServer {
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	return fs
}

// bigStore is the fake fleet of bigServers(n) on a new fake clock, and a
// new bbolt store (its path returned) holding the fleet's running plan
// "big" at concurrency conc, whose first flying reboots are in flight
// (their jobs created at the fleet, with ctx).
func bigStore(t *testing.T, ctx context.Context, n int, conc plan.Limit, flying int) (*fake.Clock, *fake.Fleet, string) {
	t.Helper()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", bigServers(n)...)
	p := newPlan37(t, fleet.Servers(), "big", conc, clk.Now(), true)
	at := clk.Now()
	for i := 0; i < flying; i++ {
		r := &p.Reboots[i]
		r.Step, r.StepSince, r.JobUUID, r.JobCreatedAt, r.AskedAt = plan.StepJob, &at, plan.JobUUID(p, r.ServerUUID), &at, &at
		require.NoError(t, fleet.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: r.ServerUUID, JobUUID: r.JobUUID, PlanUUID: p.UUID, Drain: true}))
	}
	path := filepath.Join(t.TempDir(), "plans.db")
	createStore(t, ctx, path, p)
	return clk, fleet, path
}

// The users of groupWorld: the service user (the store's owner, the
// executor's), its group, the operators' group and an operator of it.
const groupSvc, groupNogroup, groupOps, groupOp = 65534, 65534, 4242, 4343

// groupWorld is review37sWorld's store (a running plan p1 of three
// servers) shared through a group (shareStore: svc:ops 0660, its
// directory svc:ops dirMode, svc not a member of ops), and a copy of the
// rebootctl binary every user may run. Its tests need root.
type groupWorld struct {
	e                 *env
	dir, bin          string
	service, operator *syscall.Credential
}

func newGroupWorld(t *testing.T, dirMode os.FileMode) *groupWorld {
	t.Helper()
	e, _, _ := review37sWorld(t, 3)
	shareStore(t, e.store, groupSvc, groupOps, dirMode)
	dir := filepath.Dir(e.store)
	bin := filepath.Join(filepath.Dir(dir), "rebootctl")
	b, err := os.ReadFile(binary)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return &groupWorld{e: e, dir: dir, bin: bin,
		service:  &syscall.Credential{Uid: groupSvc, Gid: groupNogroup, Groups: []uint32{}},
		operator: &syscall.Credential{Uid: groupOp, Gid: groupOp, Groups: []uint32{groupOps}}}
}

// command is rebootctl args on the world's store, run as cred.
func (g *groupWorld) command(ctx context.Context, cred *syscall.Credential, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, g.bin, args...)
	cmd.Env = append(os.Environ(), "REBOOTCTL_STORE="+g.e.store, "HOME="+g.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

// as runs rebootctl args as cred, and returns what it printed.
func (g *groupWorld) as(cred *syscall.Credential, args ...string) ([]byte, error) {
	return g.command(context.Background(), cred, args...).CombinedOutput()
}
