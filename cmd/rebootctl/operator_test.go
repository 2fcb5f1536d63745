//go:build e2e

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wrongPassword makes server k's BMC password come from a variable that
// holds a wrong one.
func wrongPassword(k int) labOption {
	return func(i int, bmc string) string {
		if i != k {
			return bmc
		}
		return strings.Replace(bmc, "    health:", "      password_env: E2E_WRONG_PASSWORD\n    health:", 1)
	}
}

// unreachableBMC points server k at a Redfish address where nothing
// listens.
func unreachableBMC(t *testing.T, k int) labOption {
	addr := deadAddr(t)
	return func(i int, bmc string) string {
		if i != k {
			return bmc
		}
		_, rest, _ := strings.Cut(bmc, "    health:")
		return "    bmc:\n      redfish: https://" + addr + "\n    health:" + rest
	}
}

// deadPort is the next port deadAddr tries.
var deadPort atomic.Int32

// deadAddr returns a loopback address where nothing listens, on a port
// below the kernel's ephemeral range (32768 and up on Linux), so that no
// emulated BMC of the test, which binds port 0, can get it later: a port
// taken with port 0 and closed was given to another server's emulator
// under load (TestFiftyServersFiveDeadBMCs: "its BMC is also server
// cn22's").
func deadAddr(t *testing.T) string {
	t.Helper()
	deadPort.CompareAndSwap(0, int32(20000+os.Getpid()%8000))
	for range 4000 {
		p := deadPort.Add(1)
		if p >= 32000 {
			deadPort.Store(20000)
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use: someone listens there
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free port below 32000 for an unreachable BMC")
	return ""
}

var portRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// TestDryRunIsAPreflight (issue 27): `plan create -n` printed what a real
// plan prints, checked nothing, stored a plan that blocked the real one.
// Now it checks every server without changing its power (one login
// each), prints a table of what would fail, exits non-zero, and stores
// nothing.
func TestDryRunIsAPreflight(t *testing.T) {
	l := newLab(t, 5, 1, wrongPassword(1), unreachableBMC(t, 2))
	out, errs, code := l.ctl("plan", "create", "--all", "-n", "-N", "2", "--target", "2", "--uuid", "dry-1")
	t.Logf("dry run:\n%s%s", out, errs)
	assert.Equal(t, exitDryRun, code, errs)
	assert.Contains(t, out, "dry run")
	golden(t, "dry-run.txt", portRE.ReplaceAllString(out, "127.0.0.1:PORT"))
	assert.Regexp(t, `cn1 .*FAIL.*refused the login`, out)
	assert.Regexp(t, `cn2 .*FAIL.*does not answer`, out)
	assert.Contains(t, out, "2 of 5 server(s) would fail: cn1, cn2")
	for id, p := range l.powers {
		assert.Empty(t, p.Truth(), "server %s: no power change", id)
	}
	for id, n := range l.logins {
		if id != l.ids[2] {
			assert.Equal(t, int64(1), n.Load(), "server %s: one login", id)
		}
	}
	// A dry-run plan an older rebootctl stored says so, and blocks nothing.
	st, err := plan.OpenBolt(l.store)
	require.NoError(t, err)
	var fleet []plan.Server
	for i, id := range l.ids {
		fleet = append(fleet, plan.Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1"})
	}
	old, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "old-dry", Target: "3", Select: plan.SelectAll, Concurrency: plan.Count(1), DryRun: true})
	require.NoError(t, err)
	require.NoError(t, st.Create(t.Context(), old))
	st.Close()
	out, _, code = l.ctl("plan", "list")
	require.Equal(t, 0, code)
	assert.Regexp(t, `old-dry +created \(dry run\)`, out)
	out, _, _ = l.ctl("plan", "show", "old-dry")
	assert.Contains(t, out, "dry run: nothing was rebooted")

	// Nothing stored: the real plan is not blocked.
	out, _, code = l.ctl("plan", "list")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "dry-1")
	_, errs, code = l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "real-1")
	assert.Equal(t, 0, code, errs)

	// Everything fine: exit 0.
	l2 := newLab(t, 3, 1)
	out, errs, code = l2.ctl("plan", "create", "--all", "-n", "--target", "2")
	assert.Equal(t, 0, code, "%s%s", out, errs)
	assert.Contains(t, out, "every check passed on the 3 server(s)")

	// A wrong password on an IPMI BMC (the lab's last server).
	l3 := newLab(t, 2, 0, wrongPassword(1))
	out, errs, code = l3.ctl("plan", "create", "--all", "-n", "--target", "2")
	assert.Equal(t, exitDryRun, code, "%s%s", out, errs)
	assert.Regexp(t, `cn1 .*FAIL.*refused the login`, out)
}

// TestMessagesInOperatorsWords (issue 27): no Go identifiers, one hint,
// hostnames and the plan named, how to cancel it, how many reboots still
// finish after a cancel, a validated --uuid.
func TestMessagesInOperatorsWords(t *testing.T) {
	l := newLab(t, 3, 1)
	_, errs, code := l.ctl("plan", "create", "--all", "--target", "1")
	assert.Equal(t, exitWarnings, code)
	assert.NotContains(t, errs, "IgnoreWarnings")
	assert.Equal(t, 1, strings.Count(errs, "-W"), "the hint once:\n%s", errs)
	assert.Contains(t, errs, "warning: cn0 already runs the target platform 1")
	assert.NotContains(t, errs, "00000000-0000", "hostnames, not UUIDs")

	_, errs, code = l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "first")
	require.Equal(t, 0, code, errs)
	_, errs, code = l.ctl("plan", "create", "cn1", "cn2", "--target", "2", "--uuid", "second")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "2 server(s) are in plan first (created)")
	assert.Contains(t, errs, "cn1, cn2")
	assert.Contains(t, errs, "rebootctl plan cancel first")
	assert.NotContains(t, errs, "00000000-0000")

	_, errs, code = l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "../etc")
	assert.Equal(t, exitUsage, code, "an invalid --uuid is a usage error")
	assert.Contains(t, errs, "--uuid \"../etc\": 1 to 128 letters")

	out, errs, code := l.ctl("plan", "cancel", "first")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "no reboot was in flight")
	_, errs, code = l.ctl("plan", "cancel", "first")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "plan first is canceled: it cannot be canceled")
	assert.NotContains(t, errs, "not allowed in this state")
	_, errs, _ = l.ctl("plan", "show", "nosuch")
	assert.Contains(t, errs, "no plan nosuch in the store")
	_, errs, code = l.ctl("plan", "create", "cn1", "nosuch-host", "--target", "2")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "not in the inventory: nosuch-host")
	assert.NotContains(t, errs, "plan: unknown server")

	// A cancel with reboots in flight says what is withdrawn and what
	// still finishes (issue 38, B.14; old code: "will still finish",
	// though most are withdrawn).
	st, err := plan.OpenBolt(l.store)
	require.NoError(t, err)
	p := runningPlan(t, st, "third", l)
	st.Close()
	out, errs, code = l.ctl("plan", "cancel", p.UUID)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "the 1 reboot(s) in flight are withdrawn: a server not yet powered off is undrained and left running")
	assert.Contains(t, out, "may already have been accepted completes its power cycle")
	assert.NotContains(t, out, "will still finish")
}

// runningPlan stores a running plan over the lab whose first reboot is in
// flight (step job since a minute) and whose second is done.
func runningPlan(t *testing.T, st *plan.BoltStore, uuid string, l *lab) plan.Plan {
	t.Helper()
	var fleet []plan.Server
	for i, id := range l.ids {
		fleet = append(fleet, plan.Server{UUID: id, Hostname: fmt.Sprintf("cn%d", i), Platform: "1"})
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1)})
	require.NoError(t, err)
	p.State = plan.StateRunning
	t0 := time.Now().Add(-time.Minute)
	p.Reboots[0].Step, p.Reboots[0].JobUUID, p.Reboots[0].StartedAt, p.Reboots[0].StepSince = plan.StepJob, "j0", &t0, &t0
	require.NoError(t, st.Create(t.Context(), p))
	return p
}

// TestWatchOnAPipe (issue 27): on a pipe, watch printed a block every
// second because the "for 12s" counter changed; it prints when something
// else changes.
func TestWatchOnAPipe(t *testing.T) {
	l := newLab(t, 3, 0)
	st, err := plan.OpenBolt(l.store)
	require.NoError(t, err)
	runningPlan(t, st, "piped", l)
	st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"plan", "watch", "piped", "--store", l.store, "--inventory", l.inv}, &out, &errs)
	assert.Equal(t, exitInterrupt, code)
	assert.Equal(t, 1, strings.Count(out.String(), "plan piped: running"), "one block in 3.5 s of nothing changing:\n%s", out.String())
	assert.Contains(t, errs.String(), "rebootctl plan cancel piped", "a running plan: how to end it")
}

// TestWatchAfterCancel (issue 27): after a cancel, watch's Ctrl-C hint
// still suggested cancelling; a stopped plan showed an ETA.
func TestWatchAfterCancel(t *testing.T) {
	l := newLab(t, 3, 0)
	st, err := plan.OpenBolt(l.store)
	require.NoError(t, err)
	runningPlan(t, st, "gone", l)
	_, err = plan.Command(t.Context(), st, "gone", plan.Cancel)
	require.NoError(t, err)
	st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"plan", "watch", "gone", "--store", l.store, "--inventory", l.inv}, &out, &errs)
	assert.Equal(t, exitInterrupt, code)
	assert.NotContains(t, errs.String(), "plan cancel", "canceled already:\n%s", errs.String())
	assert.Contains(t, errs.String(), "plan gone is canceled")
	assert.NotContains(t, out.String(), "ETA")
}

// TestPlatformReached (issue 27): after a completed plan the inventory
// still said the old platform, so the same plan could be created again
// without a warning. The store's record of the completed reboots counts.
func TestPlatformReached(t *testing.T) {
	l := newLab(t, 3, 1)
	_, errs, code := l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "up")
	require.Equal(t, 0, code, errs)
	st, err := plan.OpenBolt(l.store)
	require.NoError(t, err)
	_, err = plan.Edit(t.Context(), st, "up", func(p plan.Plan) (plan.Plan, error) {
		q := p.Clone()
		q.State = plan.StateComplete
		at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		for i := range q.Reboots {
			q.Reboots[i].Step, q.Reboots[i].JobUUID, q.Reboots[i].StartedAt, q.Reboots[i].OperationalAt = plan.StepDone, "j", &at, &at
		}
		return q, nil
	})
	require.NoError(t, err)
	st.Close()
	_, errs, code = l.ctl("plan", "create", "--all", "--target", "2", "--uuid", "again")
	assert.Equal(t, exitWarnings, code, errs)
	assert.Contains(t, errs, "warning: cn0 already runs the target platform 2 (plan up rebooted it into 2 at 2026-11-01 12:00")
	_, errs, code = l.ctl("plan", "create", "--all", "--target", "3", "--uuid", "next")
	assert.Equal(t, 0, code, errs)
}

// TestDryRunExitCodeDocumented: the usage text lists exit code 6.
func TestDryRunExitCodeDocumented(t *testing.T) {
	assert.Contains(t, strings.Join(strings.Fields(usage), " "), "6 the dry run found servers that would fail")
}
