//go:build e2e

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusesMissingStore: every command but plan create refuses a store
// that does not exist, says so, and does not create an empty one (an
// executor or a watch started in another directory must not look at an
// empty store of its own); the executor says so and waits for plan create
// to make it (issue 26, B7).
func TestRefusesMissingStore(t *testing.T) {
	l := newLab(t, 2, 0)
	missing := filepath.Join(l.dir, "elsewhere", "..", "typo.db")
	for _, args := range [][]string{
		{"plan", "list"},
		{"plan", "show", "p1"},
		{"plan", "watch", "p1"},
		{"plan", "run", "p1"},
		{"plan", "stop", "p1"},
		{"plan", "cancel", "p1"},
	} {
		_, errs, code := l.ctl(append(args, "--store", missing)...)
		assert.Equal(t, exitError, code, "%v: %s", args, errs)
		assert.Contains(t, errs, "does not exist", args)
		_, err := os.Stat(missing)
		assert.ErrorIs(t, err, os.ErrNotExist, "%v created the store", args)
	}
	_, logPath := l.executorWith("executor-missing.log", nil, "--store", missing)
	eventually(t, 30*time.Second, func() string {
		log, _ := os.ReadFile(logPath)
		if !strings.Contains(string(log), "does not exist") {
			return "the executor does not say the store is missing:\n" + string(log)
		}
		return ""
	})
	time.Sleep(time.Second)
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, os.ErrNotExist, "the executor created the store")
}

// executorWith starts `rebootctl executor` with the lab's short timings,
// extra environment and extra arguments, logging to name in the lab's
// directory, at the default log level (no -v).
func (l *lab) executorWith(name string, env []string, args ...string) (*exec.Cmd, string) {
	l.t.Helper()
	cmd := exec.Command(binary, append([]string{"executor", "--interval", "200ms", "--poll", "100ms", "--stale-reads", "1s", "--soft-timeout", "3s", "--self", "none"}, args...)...)
	cmd.Env = append(l.env(), env...)
	logPath := filepath.Join(l.dir, name)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(l.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(l.t, cmd.Start())
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		logf.Close()
		if l.t.Failed() {
			log, _ := os.ReadFile(logPath)
			l.t.Logf("%s:\n%s", name, log)
		}
	})
	return cmd, logPath
}

// eventually polls f until it returns "" (or fails the test with its last
// answer after d).
func eventually(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBMCErrorsAreShown: with a password the BMCs refuse, the executor
// says so at its default log level, `plan show` and `plan watch` show the
// server's power phase and its last BMC error with its class, and the
// metrics count it (issue 26, B6 and B10; old code: the start line and
// nothing else, and watch said wait_services).
func TestBMCErrorsAreShown(t *testing.T) {
	l := newLab(t, 2, 0)
	const uuid = "e2e-auth"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, 0, code, errs)
	_, logPath := l.executorWith("executor-auth.log", []string{"E2E_BMC_PASSWORD=wrong-password"}, "--metrics-addr", "127.0.0.1:0")
	eventually(t, time.Minute, func() string {
		log, _ := os.ReadFile(logPath)
		if !strings.Contains(string(log), "authentication failed at the BMC") {
			return "the executor log (default level) does not say the BMC refused the password:\n" + string(log)
		}
		return ""
	})
	log, _ := os.ReadFile(logPath)
	assert.NotContains(t, string(log), "wrong-password")
	assert.NotContains(t, string(log), bmcPassword)
	eventually(t, time.Minute, func() string {
		out, errs, code := l.ctl("plan", "show", uuid)
		if code != 0 || !strings.Contains(out, "BMC error [auth]") || !strings.Contains(out, "authentication failed at the BMC") {
			return fmt.Sprintf("plan show does not show the BMC error (exit %d):\n%s%s", code, out, errs)
		}
		return ""
	})
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(string(log))
	require.NotNil(t, m, "the executor says where its metrics are:\n%s", log)
	resp, err := http.Get(m[1])
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Regexp(t, `rebootctl_bmc_errors_total\{class="auth"\} [1-9]`, string(body))
	assert.Regexp(t, `rebootctl_plans\{state="running"\} 1`, string(body))
	assert.Regexp(t, `rebootctl_reboots\{step="job"\} 1`, string(body))
	assert.Contains(t, string(body), "rebootctl_pass_duration_seconds_count")
	assert.Regexp(t, `rebootctl_last_successful_pass_timestamp_seconds [0-9.e+]+`, string(body))

	// watch, in a terminal.
	screen := watchScreen(t, l, uuid, "authentication failed")
	assert.Contains(t, screen, "BMC error [auth]")
	if *update {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "watch-auth-screen.txt"), []byte(screen), 0o644))
	}
	t.Logf("watch screen while the BMC refuses the password:\n%s", screen)
}

// watchScreen runs `plan watch` in tmux until the screen contains want,
// and returns the screen.
func watchScreen(t *testing.T, l *lab, uuid, want string) string {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("tmux missing although CI installed it")
		}
		t.Skip("TERMINAL TEST SKIPPED: tmux not installed (apt-get install tmux)")
	}
	session := fmt.Sprintf("rebootctl-auth-%d", os.Getpid())
	sock := filepath.Join(l.dir, "tmux-auth.sock")
	var env strings.Builder
	for _, kv := range []string{"REBOOTCTL_STORE=" + l.store, "REBOOTCTL_INVENTORY=" + l.inv} {
		fmt.Fprintf(&env, "export %q\n", kv)
	}
	script := filepath.Join(l.dir, "watch-auth.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+env.String()+binary+" plan watch "+uuid+"\nsleep 60\n"), 0o755))
	out, err := exec.Command(tmux, "-S", sock, "new-session", "-d", "-s", session, "-x", "120", "-y", "10", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	var screen string
	eventually(t, time.Minute, func() string {
		out, _ := exec.Command(tmux, "-S", sock, "capture-pane", "-p", "-t", session).CombinedOutput()
		screen = string(out)
		if !strings.Contains(screen, want) {
			return "watch never showed " + want + ":\n" + screen
		}
		return ""
	})
	return screen
}

// TestExecutorHeartbeat: the executor writes a heartbeat to the store;
// list, show and watch say when it was last seen, and warn when none ever
// ran on the store or the last one stopped (issue 26, B7; old code: a
// dead executor left watch showing running with a frozen ETA).
func TestExecutorHeartbeat(t *testing.T) {
	l := newLab(t, 2, 0)
	const uuid = "e2e-heartbeat"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid)
	require.Equal(t, 0, code, errs)
	out, _, _ := l.ctl("plan", "list")
	assert.Contains(t, out, "WARNING: no executor has ever run on store")
	cmd, _ := l.executorWith("executor-hb.log", nil)
	eventually(t, 30*time.Second, func() string {
		out, _, _ := l.ctl("plan", "list")
		if !strings.Contains(out, "executor: last seen") {
			return "list does not show the executor:\n" + out
		}
		return ""
	})
	out, _, _ = l.ctl("plan", "show", uuid)
	assert.Contains(t, out, "executor: last seen")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
	eventually(t, 30*time.Second, func() string {
		out, _, _ := l.ctl("plan", "show", uuid)
		if !strings.Contains(out, "WARNING: the executor was last seen") {
			return "show does not warn of a stale executor:\n" + out
		}
		return ""
	})
}
