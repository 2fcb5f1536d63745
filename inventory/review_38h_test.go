package inventory

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
	if processLives(pid) {
		t.Fatalf("health command timed out after %s (err %v) and its child (pid %d) still runs: the health check is not killed as a process group",
			time.Since(start).Round(time.Millisecond), err, pid)
	}
}

// TestReview38h_CommandExitZeroBackgroundChildFailsAndLeaks: command's
// doc: "it returns at most commandWaitDelay after the timeout or ctx's
// end, its process group killed". An undrain (or drain, or reboot)
// command that exits 0 but leaves a background child holding its output
// (a wrapper that starts a helper with &) is reported FAILED after
// WaitDelay (exec.ErrWaitDelay), and its process group is never killed
// (inGroup's Cancel runs only at the timeout or ctx's end): the child
// keeps running (OS truth) and every retry of the "failed" undrain starts
// one more.
func TestReview38h_CommandExitZeroBackgroundChildFailsAndLeaks(t *testing.T) {
	w, _ := newWorld(t, 1, 1)
	w.openForTest(t)
	w.realCommands(10 * time.Second)
	pidf := filepath.Join(t.TempDir(), "pid")
	err := w.f.command(context.Background(), []string{"sh", "-c", "sleep 30 & echo $! > " + pidf + "; exit 0"})
	b, rerr := os.ReadFile(pidf)
	if rerr != nil {
		t.Fatalf("setup: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	alive := processLives(pid)
	if err != nil || alive {
		t.Fatalf("a command that exited 0 leaving a background child: command() = %v (want nil: it succeeded), child pid %d still running: %v "+
			"(its process group is killed only at the timeout or ctx's end, never when the leader exits)", err, pid, alive)
	}
}

// processLives reports whether pid still runs, from the OS: a zombie
// (killed, not yet reaped by an init that reaps slowly, as in some
// containers) is dead. SIGKILL is delivered asynchronously, so a process
// gets up to 2s to die.
func processLives(pid int) bool {
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return false
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			// state is the field after the ")" closing the command name
			if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
				return false
			}
		}
		if time.Now().After(end) {
			return true
		}
	}
}
