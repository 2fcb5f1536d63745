package inventory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReview38h_UnsentSelfJobPlanCheckErrorFreezesFleet: the self job's
// PlanCheck keeps erroring (its plan cannot be read: admitted "retries
// with no end"). The unsent self job sits in self_rebooting for ever: it
// has no JobTimeout (decideJob times out only a sent one) and the gate
// (mayPowerOff: "this executor's own server is rebooting", state
// self_rebooting and not sent) holds every other server's power-off, of
// any plan, whose own PlanCheck answers fine. Ground truth: the other
// server's BMC is never told to power off in 30 minutes (JobTimeout 10m),
// though its job is live and its plan reads.
func TestReview38h_UnsentSelfJobPlanCheckErrorFreezesFleet(t *testing.T) {
	w, ids := newWorld(t, 2, 2)
	self, other := ids[0], ids[1]
	w.inv.Servers[0].Reboot = []string{"reboot-self", self}
	w.self = self
	w.open()
	defer func() { w.close() }()
	w.boot[self] = "boot-a"
	w.clk.Advance(time.Minute)
	w.newPlan()
	selfAsked := 0
	w.f.opts.PlanCheck = func(_ context.Context, _, job string) (bool, string, error) {
		if j, ok, err := w.f.job(job); err == nil && ok && j.Server == self {
			selfAsked++
			return false, "", errors.New("plan record unreadable")
		}
		return true, "", nil
	}
	w.run(ids, 30*time.Minute)
	sj, _, _ := w.f.job(w.f.lastJob[self])
	oj, _, _ := w.f.job(w.f.lastJob[other])
	applied := 0
	for _, o := range w.bmcs[other].offs {
		if o.applied {
			applied++
		}
	}
	if selfAsked == 0 {
		t.Skipf("setup: the self job's PlanCheck never asked (self job %s)", sj.State)
	}
	if applied == 0 {
		t.Fatalf("30 min: the self job's PlanCheck errored %d times (job %s, sent %q, never timed out: JobTimeout 10m); "+
			"the other server's job (%s %q), whose plan reads fine, was never powered off: the unsent self job holds every power-off of the fleet for ever",
			selfAsked, sj.State, sj.RebootSentBoot, oj.State, oj.Error)
	}
}

// TestReview38h_HealthCommandChildSurvivesTimeout: round 6 put drain,
// undrain and reboot commands in their own process group, killed as a
// group at the timeout; the health check command (Inventory.CheckHealth,
// health.go) still uses plain exec.CommandContext: at the health timeout
// only the script is killed, its child keeps running (OS truth: the
// child's pid is alive after CheckHealth returned). Every health check
// of a stuck probe leaks one more process.
func TestReview38h_HealthCommandChildSurvivesTimeout(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "pid")
	var inv Inventory
	inv.Defaults.HealthTimeout = Duration(time.Second)
	s := Server{Hostname: "cn0", Health: Health{Command: []string{"sh", "-c", "sleep 30 & echo $! > " + pidf + "; wait; true"}}}
	start := time.Now()
	err := inv.CheckHealth(context.Background(), s)
	if err == nil {
		t.Fatal("a health check killed at its timeout passed")
	}
	b, rerr := os.ReadFile(pidf)
	if rerr != nil {
		t.Fatalf("setup: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(300 * time.Millisecond)
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("health command timed out after %s (err %v) and its child (pid %d) still runs: the health check is not killed as a process group",
			time.Since(start).Round(time.Millisecond), err, pid)
	}
}
