//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// binary is the rebootctl binary the end-to-end tests run.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "rebootctl-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "rebootctl")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rebootctl: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lab is a set of servers behind emulated Redfish BMCs over HTTPS (a test
// CA; the last server behind an emulated IPMI BMC), with health checks served on loopback that pass once a server has
// been powered on for BootTime (ground truth of its fake.Power).
type lab struct {
	t        *testing.T
	dir      string
	ids      []string
	powers   map[string]*fake.Power
	inv      string
	store    string
	bootTime time.Duration
	// logins counts the Redfish logins (session creations) per server.
	logins map[string]*atomic.Int64

	mu sync.Mutex
}

// labOption changes one server of a lab: i is its index, bmc its
// inventory lines after the headnode flag (bmc, health, drain, undrain) as
// newLab wrote them; it returns the lines to use.
type labOption func(i int, bmc string) string

const bmcPassword = "e2e-bmc-Secret"

func newLab(t *testing.T, n, core int, opts ...labOption) *lab {
	t.Helper()
	l := &lab{t: t, dir: t.TempDir(), powers: map[string]*fake.Power{}, bootTime: 300 * time.Millisecond, logins: map[string]*atomic.Int64{}}
	ca, err := redfishtest.NewCA()
	require.NoError(t, err)
	caFile := filepath.Join(l.dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.PEM(), 0o600))
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/health/")
		if l.healthy(id) {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(health.Close)
	var b strings.Builder
	fmt.Fprintf(&b, "defaults:\n  bmc:\n    username: admin\n    password_env: E2E_BMC_PASSWORD\n    ca_file: %s\n  health_timeout: 2s\nservers:\n", caFile)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		l.ids = append(l.ids, id)
		p := fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
		l.powers[id] = p
		fmt.Fprintf(&b, "  - uuid: %s\n    hostname: cn%d\n    platform: \"1\"\n    core: %v\n    headnode: %v\n", id, i, i < core, i == 0 && core > 0)
		var section string
		if i == n-1 && n > 1 {
			// The last server has an IPMI BMC.
			bmc, err := ipmitest.NewBMC(p, ipmitest.Config{Username: "admin", Password: bmcPassword})
			require.NoError(t, err)
			t.Cleanup(func() { _ = bmc.Close() })
			section = fmt.Sprintf("    bmc:\n      ipmi: %s\n", bmc.Addr())
		} else {
			bmc := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
			logins := &atomic.Int64{}
			l.logins[id] = logins
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/SessionService/Sessions") {
					logins.Add(1)
				}
				bmc.ServeHTTP(w, r)
			}))
			srv.TLS = ca.ServerConfig()
			srv.StartTLS()
			t.Cleanup(srv.Close)
			section = fmt.Sprintf("    bmc:\n      redfish: %s\n", srv.URL)
		}
		section += fmt.Sprintf("    health:\n      http: %s/health/%s\n", health.URL, id)
		section += fmt.Sprintf("    drain: [\"sh\", \"-c\", \"echo drain >> %s/%s.log\"]\n", l.dir, id)
		section += fmt.Sprintf("    undrain: [\"sh\", \"-c\", \"echo undrain >> %s/%s.log\"]\n", l.dir, id)
		for _, o := range opts {
			section = o(i, section)
		}
		b.WriteString(section)
	}
	l.inv = filepath.Join(l.dir, "inventory.yaml")
	require.NoError(t, os.WriteFile(l.inv, []byte(b.String()), 0o600))
	l.store = filepath.Join(l.dir, "plans.db")
	return l
}

// healthy: powered on (ground truth) for at least bootTime since its last
// power-on.
func (l *lab) healthy(id string) bool {
	p, ok := l.powers[id]
	if !ok || !p.HardwareOn() {
		return false
	}
	var since time.Time // on since ever, unless it was powered on since
	for _, tc := range p.Truth() {
		if tc.On {
			since = tc.At
		}
	}
	l.mu.Lock()
	boot := l.bootTime
	l.mu.Unlock()
	return time.Since(since) >= boot
}

func (l *lab) env() []string {
	return append(os.Environ(), "E2E_BMC_PASSWORD="+bmcPassword, "E2E_WRONG_PASSWORD=not-"+bmcPassword, "REBOOTCTL_STORE="+l.store, "REBOOTCTL_INVENTORY="+l.inv)
}

// ctl runs rebootctl and returns its stdout, stderr and exit code.
func (l *lab) ctl(args ...string) (string, string, int) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = l.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		l.t.Fatalf("rebootctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// executor starts `rebootctl executor` with short timings.
func (l *lab) executor() *exec.Cmd {
	l.t.Helper()
	cmd := exec.Command(binary, "executor", "--interval", "200ms", "--poll", "100ms", "--stale-reads", "1s", "--soft-timeout", "3s", "-v")
	cmd.Env = l.env()
	logf, err := os.OpenFile(filepath.Join(l.dir, "executor.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(l.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(l.t, cmd.Start())
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		logf.Close()
		if l.t.Failed() {
			log, _ := os.ReadFile(filepath.Join(l.dir, "executor.log"))
			l.t.Logf("executor log:\n%s", log)
		}
	})
	return cmd
}

func (l *lab) get(uuid string) plan.Plan {
	l.t.Helper()
	out, errs, code := l.ctl("plan", "show", uuid, "--json")
	require.Equal(l.t, 0, code, errs)
	p, err := plan.Decode([]byte(out))
	require.NoError(l.t, err)
	return p
}

// waitFor polls the plan until cond holds.
func (l *lab) waitFor(uuid, what string, d time.Duration, cond func(plan.Plan) bool) plan.Plan {
	l.t.Helper()
	deadline := time.Now().Add(d)
	for {
		p := l.get(uuid)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("waiting for %s:\n%s", what, plan.Table(p))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// offs counts each server's power-offs (ground truth).
func (l *lab) offs() map[string]int {
	out := map[string]int{}
	for id, p := range l.powers {
		for _, tc := range p.Truth() {
			if !tc.On {
				out[id]++
			}
		}
	}
	return out
}

// maxOffline is the most servers off at one instant (ground truth).
func (l *lab) maxOffline() int {
	type ev struct {
		at  time.Time
		off int
	}
	var evs []ev
	for _, p := range l.powers {
		for _, tc := range p.Truth() {
			if tc.On {
				evs = append(evs, ev{tc.At, -1})
			} else {
				evs = append(evs, ev{tc.At, +1})
			}
		}
	}
	sortEvents := func() {
		for i := 1; i < len(evs); i++ {
			for j := i; j > 0 && (evs[j].at.Before(evs[j-1].at) || evs[j].at.Equal(evs[j-1].at) && evs[j].off > evs[j-1].off); j-- {
				evs[j], evs[j-1] = evs[j-1], evs[j]
			}
		}
	}
	sortEvents()
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.off
		best = max(best, cur)
	}
	return best
}

// TestEndToEnd: create, run, stop mid-way, run again, kill the executor
// in the middle of a reboot and start it again, finish; every server is
// power-cycled exactly once (ground truth of the emulated hardware) and
// never more than the concurrency are off at once.
func TestEndToEnd(t *testing.T) {
	l := newLab(t, 6, 2)
	const uuid = "e2e-plan-1"

	// Warnings refuse creation, with their own exit code.
	_, errs, code := l.ctl("plan", "create", "--all", "--target", "1", "--uuid", "refused")
	assert.Equal(t, exitWarnings, code, errs)
	assert.Contains(t, errs, "already runs the target platform")

	out, errs, code := l.ctl("plan", "create", "--all", "-N", "2", "--target", "2", "--uuid", uuid, "--json")
	require.Equal(t, 0, code, errs)
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	assert.Equal(t, uuid, created["uuid"])
	assert.Equal(t, "created", created["state"])

	exec1 := l.executor()
	_, errs, code = l.ctl("plan", "run", uuid)
	require.Equal(t, 0, code, errs)

	// Stop after the first non-core reboot started; in-flight ones finish.
	l.waitFor(uuid, "a non-core reboot to start", time.Minute, func(p plan.Plan) bool {
		return countStep(p, func(r plan.Reboot) bool { return !r.Core && r.Step != plan.StepPending }) > 0
	})
	_, errs, code = l.ctl("plan", "stop", uuid)
	require.Equal(t, 0, code, errs)
	p := l.waitFor(uuid, "the in-flight reboots to finish", time.Minute, func(p plan.Plan) bool {
		return countStep(p, func(r plan.Reboot) bool { return r.Step.InFlight() }) == 0
	})
	assert.Equal(t, plan.StateStopped, p.State)
	pending := countStep(p, func(r plan.Reboot) bool { return r.Step == plan.StepPending })
	assert.Greater(t, pending, 0, "stopped mid-way")
	time.Sleep(time.Second)
	assert.Equal(t, pending, countStep(l.get(uuid), func(r plan.Reboot) bool { return r.Step == plan.StepPending }), "nothing starts while stopped")

	// Run again; kill the executor while a power cycle is under way.
	_, errs, code = l.ctl("plan", "run", uuid)
	require.Equal(t, 0, code, errs)
	l.waitFor(uuid, "a job in flight", time.Minute, func(p plan.Plan) bool {
		return countStep(p, func(r plan.Reboot) bool { return r.Step == plan.StepJob }) > 0
	})
	require.NoError(t, exec1.Process.Signal(syscall.SIGKILL))
	_, _ = exec1.Process.Wait()
	time.Sleep(500 * time.Millisecond)
	l.executor()

	out, errs, code = l.ctl("plan", "watch", uuid)
	require.Equal(t, 0, code, "watch: %s\n%s", errs, out)
	assert.Contains(t, out, "6/6 done")
	p = l.get(uuid)
	assert.Equal(t, plan.StateComplete, p.State)
	for id, n := range l.offs() {
		assert.Equal(t, 1, n, "server %s power-cycled %d times", id, n)
	}
	assert.LessOrEqual(t, l.maxOffline(), 2, "concurrency")
	for _, id := range l.ids {
		log, err := os.ReadFile(filepath.Join(l.dir, id+".log"))
		require.NoError(t, err)
		assert.Contains(t, string(log), "drain\nundrain", "server %s drained then undrained", id)
	}

	// list --json
	out, _, code = l.ctl("plan", "list", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"state": "complete"`)
}

// TestCancel: a cancel mid-way ends the plan (watch exits 5) and the
// servers it never started are never power-cycled.
func TestCancel(t *testing.T) {
	l := newLab(t, 5, 0)
	const uuid = "e2e-cancel"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, 0, code, errs)
	l.executor()
	l.waitFor(uuid, "the first reboot to end", time.Minute, func(p plan.Plan) bool {
		return countStep(p, func(r plan.Reboot) bool { return r.Step == plan.StepDone }) > 0
	})
	_, errs, code = l.ctl("plan", "cancel", uuid)
	require.Equal(t, 0, code, errs)
	_, _, code = l.ctl("plan", "watch", uuid)
	assert.Equal(t, exitCanceled, code)
	p := l.get(uuid)
	offs := l.offs()
	for _, r := range p.Reboots {
		if r.Step == plan.StepPending {
			assert.Zero(t, offs[r.ServerUUID], "%s never started, never cycled", r.ServerHostname)
		}
	}
}

// TestGolden: the help texts and `plan show --json` of a new plan.
func TestGolden(t *testing.T) {
	l := newLab(t, 3, 1)
	for name, args := range map[string][]string{
		"help.txt":          {"--help"},
		"create-help.txt":   {"plan", "create", "-h"},
		"executor-help.txt": {"executor", "-h"},
	} {
		out, errs, code := l.ctl(args...)
		require.Equal(t, 0, code, errs)
		golden(t, name, out+errs)
	}
	_, errs, code := l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "golden-plan")
	require.Equal(t, 0, code, errs)
	out, errs, code := l.ctl("plan", "show", "golden-plan", "--json")
	require.Equal(t, 0, code, errs)
	out = regexp.MustCompile(`"created_at": "[^"]*"`).ReplaceAllString(out, `"created_at": "CREATED"`)
	golden(t, "show-json.txt", out)
}

// TestWatchInTerminal runs `plan watch` in a real terminal (tmux): the
// view redraws in place (one header on the screen, however long it ran),
// shows the reboots in flight, and Ctrl-C leaves the plan running and says
// how to stop or cancel it. With -update the screen is written to
// testdata/watch-screen.txt (never compared: it has timings).
func TestWatchInTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("tmux missing although CI installed it")
		}
		t.Skip("TERMINAL TEST SKIPPED: tmux not installed (apt-get install tmux)")
	}
	l := newLab(t, 5, 1)
	l.mu.Lock()
	l.bootTime = 2 * time.Second // slow enough to watch
	l.mu.Unlock()
	const uuid = "e2e-watch"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, 0, code, errs)
	l.executor()

	session := fmt.Sprintf("rebootctl-e2e-%d", os.Getpid())
	sock := filepath.Join(l.dir, "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	script := filepath.Join(l.dir, "watch.sh")
	var env strings.Builder
	for _, kv := range []string{"E2E_BMC_PASSWORD=" + bmcPassword, "REBOOTCTL_STORE=" + l.store, "REBOOTCTL_INVENTORY=" + l.inv} {
		fmt.Fprintf(&env, "export %q\n", kv)
	}
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ntrap 'true' INT\n"+env.String()+binary+" plan watch "+uuid+"\necho \"exit code $?\"\nsleep 60\n"), 0o755))
	tm("new-session", "-d", "-s", session, "-x", "100", "-y", "20", script)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })

	capture := func() string { return tm("capture-pane", "-p", "-t", session) }
	var screen string
	deadline := time.Now().Add(time.Minute)
	for {
		screen = capture()
		if strings.Contains(screen, "(core)") || strings.Contains(screen, "(headnode)") || regexp.MustCompile(`cn\d+ +(job|wait_services)`).MatchString(screen) {
			if strings.Count(screen, "plan "+uuid) == 1 && regexp.MustCompile(`[1-9]/5 done`).MatchString(screen) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch screen never showed progress with a reboot in flight:\n%s", screen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	assert.Equal(t, 1, strings.Count(screen, "plan "+uuid), "redrawn in place:\n%s", screen)
	assert.Contains(t, screen, "concurrency 1")
	if *update {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "watch-screen.txt"), []byte(screen), 0o644))
	}
	t.Logf("watch screen:\n%s", screen)

	tm("send-keys", "-t", session, "C-c")
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(screen, "exit code") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		screen = capture()
	}
	assert.Contains(t, screen, "keeps running")
	assert.Contains(t, screen, "rebootctl plan stop "+uuid)
	assert.Contains(t, screen, "rebootctl plan cancel "+uuid)
	assert.Contains(t, screen, "exit code 130")
	p := l.waitFor(uuid, "the plan to finish after watch was interrupted", 2*time.Minute, func(p plan.Plan) bool { return !p.Unfinished() })
	assert.Equal(t, plan.StateComplete, p.State)
}
