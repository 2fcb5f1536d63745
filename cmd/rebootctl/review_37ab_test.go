package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// review37abInventory writes an inventory of one server s1 (UUID
// 00000001-...) and returns its path.
func review37abInventory(t *testing.T) string {
	t.Helper()
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	require.NoError(t, os.WriteFile(invPath, []byte("defaults:\n  bmc: {username: admin, password_env: X37AB_PW, redfish: \"https://127.0.0.1:1\"}\n"+
		"servers:\n  - {uuid: 00000001-0000-4000-8000-000000000000, hostname: s1, platform: \"1\", bmc: {system: s1}, health: {tcp: \"127.0.0.1:1\"}}\n"), 0o600))
	t.Setenv("X37AB_PW", "pw")
	return invPath
}

// TestReview37ab_AbandonWayOutFailsWhenServerInNewerPlan (review 37
// round 25): the refusal of an executor with another fleet state file
// names the way out, "give each of these servers up first (rebootctl
// plan abandon PLAN SERVER ...)", with the plan of the ledger entry. A
// server whose power cycle did not settle in an ended plan P (its job
// gave up at the job timeout: the plan recorded the reboot failed and
// ended failed; the dead executor's file owes its power-on) is in a
// newer plan Q the operator created since. The operator follows the
// refusal: `plan abandon P s1` is refused, "plan Q reboots s1 now:
// abandon it there"; they do (`plan abandon Q s1`): the abandon record
// (one per server) now names Q, the ledger entry names P, and the
// executor is refused again, for ever: no abandon the tool accepts gives
// the entry up. Expected: following the messages ends the refusal.
func TestReview37ab_AbandonWayOutFailsWhenServerInNewerPlan(t *testing.T) {
	ctx := context.Background()
	invPath := review37abInventory(t)
	store := filepath.Join(t.TempDir(), "plans.db")
	ctl := func(args ...string) (int, string) {
		var out, errw bytes.Buffer
		cctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		code := run(cctx, append(args, "--store", store, "--inventory", invPath), &out, &errw)
		return code, out.String() + errw.String()
	}
	const server = "00000001-0000-4000-8000-000000000000"
	code, msg := ctl("plan", "create", "--all", "--target", "2", "--uuid", "p-old")
	require.Equal(t, exitOK, code, msg)
	// p-old ended failed: s1's job gave up on its power cycle at the job
	// timeout (its BMC stopped answering mid-cycle).
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	p, err := bs.Get(ctx, "p-old")
	require.NoError(t, err)
	p.State = plan.StateFailed
	p.Reboots[0].Step = plan.StepFailed
	p.Reboots[0].JobUUID = "j-old"
	p.Reboots[0].Error = "job timed out: the server may be off"
	require.NoError(t, bs.Put(ctx, p))
	require.NoError(t, bs.Close())
	code, msg = ctl("plan", "create", "--all", "--target", "2", "--uuid", "p-new")
	require.Equal(t, exitOK, code, "a new plan of s1 once p-old ended: %s", msg)

	// The dead executor's lease and ledger: its file owes s1 its power-on
	// (p-old's job).
	e := &env{ctx: ctx, store: store, errw: io.Discard}
	host, _ := os.Hostname()
	owner := lease{ID: newLeaseID(), Host: "dead-machine", PID: 1, State: "/var/lib/first.fleet", StateID: "aaaa", Gen: "g1",
		Started: time.Now().Add(-time.Hour).UTC(), Interval: time.Second}
	owed := []inventory.Owed{{Server: server, Hostname: "s1", Plan: "p-old", Job: "j-old", What: inventory.OwedPower}}
	_, err = claimCore(ctx, lockedStore{e}, owner, lease{}, owed, time.Now().Add(-time.Hour).UTC())
	require.NoError(t, err)

	other := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/other.fleet", StateID: "bbbb", Started: time.Now().UTC(), Interval: time.Second}
	err = claim(ctx, lockedStore{e}, other, time.Now().UTC())
	require.ErrorIs(t, err, errOtherState)
	require.Contains(t, err.Error(), "s1 (plan p-old)")
	t.Logf("refusal: %v", err)

	// The operator follows the messages.
	code, msg = ctl("plan", "abandon", "p-old", "s1")
	t.Logf("plan abandon p-old s1: exit %d: %s", code, msg)
	if code != exitOK {
		require.Contains(t, msg, "rebootctl plan abandon p-new s1", "the refusal of the abandon names the plan to give")
		code, msg = ctl("plan", "abandon", "p-new", "s1")
		t.Logf("plan abandon p-new s1: exit %d: %s", code, msg)
		require.Equal(t, exitOK, code, msg)
	}
	var abandoned []byte
	require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) (err error) {
		abandoned, err = st.GetMeta(ctx, metaAbandoned)
		return err
	}))
	t.Logf("abandon records: %s", abandoned)
	var raw []byte
	require.NoError(t, lockedStore{e}.with(func(st *plan.BoltStore) (err error) { raw, err = st.GetMeta(ctx, metaOwed); return err }))
	var ledger []inventory.Owed
	require.NoError(t, json.Unmarshal(raw, &ledger))
	t.Logf("ledger: %+v", ledger)
	err = claim(ctx, lockedStore{e}, other, time.Now().UTC())
	require.NoError(t, err, "the operator gave s1 up as the refusal and the abandon told them to, yet the executor with another fleet state file is still refused")
}

// TestReview37ab_LiveExecutorInOtherPIDNamespaceTakenForDead (review 37
// round 25): a lease "of a process of this machine that no longer runs
// has lapsed at once" (lease.lapsed), and "this machine" is told by the
// hostname alone. Two executors in containers of one machine with host
// networking (a Kubernetes hostNetwork pod, docker --network host: the
// node's hostname) have the same hostname and each its own PID namespace:
// the PID in the first's lease is not a process in the second's
// namespace, so the second takes the store over at once from an executor
// that runs and renewed its lease a moment ago; the first, at its next
// renewal, sees the second's PID "dead" in its own namespace and takes it
// back, and so on. Ground truth: the first executor's process (here a
// process in a new PID namespace, its PID there recorded as the lease's)
// runs throughout. Expected: errOtherExecutor (one live executor per
// plan store).
func TestReview37ab_LiveExecutorInOtherPIDNamespaceTakenForDead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("no unshare")
	}
	// The first executor: a process in a PID namespace of its own (same
	// hostname), its PID there printed.
	target := 60
	for processRuns(target) {
		target++
	}
	script := fmt.Sprintf("while :; do sleep 120 & p=$!; if [ $p -ge %d ]; then echo $p; wait; exit; fi; kill $p; wait $p 2>/dev/null; done", target)
	cmd := exec.Command("/usr/bin/unshare", "-p", "-f", "sh", "-c", script)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	nsPID, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	if processRuns(nsPID) {
		t.Skipf("PID %d runs in this namespace too", nsPID)
	}
	require.NoError(t, syscall.Kill(cmd.Process.Pid, 0), "the first executor's process runs")

	e, _, _ := review37sWorld(t, 1)
	host, _ := os.Hostname()
	first := lease{ID: newLeaseID(), Host: host, PID: nsPID, State: "/var/lib/rebootctl/plans.db.fleet", StateID: "aaaa", Gen: "g1",
		Started: time.Now().Add(-time.Hour).UTC(), Interval: 5 * time.Second}
	require.NoError(t, claim(e.ctx, lockedStore{e}, first, time.Now().UTC()), "the first executor's claim, renewed now")
	renewing(t, e, first, time.Second, 0) // it runs: it renews its lease every second

	second := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/rebootctl/plans.db.fleet", StateID: "bbbb",
		Started: time.Now().UTC(), Interval: 5 * time.Second}
	err = claim(e.ctx, lockedStore{e}, second, time.Now().UTC())
	require.NoError(t, syscall.Kill(cmd.Process.Pid, 0), "the first executor's process still runs")
	require.ErrorIs(t, err, errOtherExecutor, "a second executor (same hostname, another PID namespace) took the store over from one that runs and renewed its lease a moment ago")
}

// TestReview37ab_StaleAbandonGivesUpTakenBackCycle (review 37 round 25):
// the operator abandoned s1 in plan p-old mid power cycle (plan abandon:
// the store keeps the record, s1 -> p-old, for good). After the cut-off,
// a job of a later plan p-new took s1 back, and with it the abandoned
// power cycle (inventory/fleet.go:778: h.Job = "", Watch: "the fleet
// powers it on if it reads off"); p-new was cancelled before its own
// reboot. s1 is off (the soft power-off sent before the abandon landed)
// and its BMC refuses the power-on: the fleet state file owes s1 its
// power-on, and Fleet.Owed lists it with no plan and no job
// (inventory/owed.go:76, planOf("")): {s1, "", "", power}, exactly what
// an inventory Fleet returns in this sequence (checked with the
// inventory test world: softOffSent, Abandon, CreateJob of p9 after
// ShutdownMax, CancelJob, On refused busy). That executor dies with its
// file. An executor with another fleet state file is let in at once:
// owedElsewhere gives a ledger entry with no plan up for an abandon of
// the server "in any plan" (lease.go:326 given), and the stale abandon
// in p-old, which the fleet's take-back undid, counts. Nobody is told
// s1 may be off, and nothing will power it on. Expected: refused, naming
// s1 (the abandon predates the power cycle the file owes).
func TestReview37ab_StaleAbandonGivesUpTakenBackCycle(t *testing.T) {
	ctx := context.Background()
	invPath := review37abInventory(t)
	store := filepath.Join(t.TempDir(), "plans.db")
	ctl := func(args ...string) (int, string) {
		var out, errw bytes.Buffer
		cctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		code := run(cctx, append(args, "--store", store, "--inventory", invPath), &out, &errw)
		return code, out.String() + errw.String()
	}
	const server = "00000001-0000-4000-8000-000000000000"
	code, msg := ctl("plan", "create", "--all", "--target", "2", "--uuid", "p-old")
	require.Equal(t, exitOK, code, msg)
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	p, err := bs.Get(ctx, "p-old")
	require.NoError(t, err)
	p.State = plan.StateRunning
	p.Reboots[0].Step = plan.StepJob
	p.Reboots[0].JobUUID = "j-old"
	require.NoError(t, bs.Put(ctx, p))
	require.NoError(t, bs.Close())
	// The operator gives s1 up mid power cycle.
	code, msg = ctl("plan", "abandon", "p-old", "s1")
	require.Equal(t, exitOK, code, msg)
	// p-old ended (s1's reboot failed, abandoned); p-new, created later,
	// took s1 back and was cancelled before its reboot.
	bs, err = plan.OpenBolt(store)
	require.NoError(t, err)
	p, err = bs.Get(ctx, "p-old")
	require.NoError(t, err)
	p.State = plan.StateFailed
	p.Reboots[0].Step = plan.StepFailed
	p.Reboots[0].Error = "abandoned by the operator"
	require.NoError(t, bs.Put(ctx, p))
	require.NoError(t, bs.Close())
	code, msg = ctl("plan", "create", "--all", "--target", "2", "--uuid", "p-new")
	require.Equal(t, exitOK, code, msg)
	bs, err = plan.OpenBolt(store)
	require.NoError(t, err)
	q, err := bs.Get(ctx, "p-new")
	require.NoError(t, err)
	q.State = plan.StateCanceled
	q.Reboots[0].Step = plan.StepFailed
	q.Reboots[0].Error = "canceled"
	q.Reboots[0].JobUUID = "j-new"
	require.NoError(t, bs.Put(ctx, q))
	require.NoError(t, bs.Close())

	// The dead executor's lease and ledger: the taken-back power cycle.
	e := &env{ctx: ctx, store: store, errw: io.Discard}
	owner := lease{ID: newLeaseID(), Host: "dead-machine", PID: 1, State: "/var/lib/first.fleet", StateID: "aaaa", Gen: "g1",
		Started: time.Now().Add(-time.Hour).UTC(), Interval: time.Second}
	owed := []inventory.Owed{{Server: server, Hostname: "s1", What: inventory.OwedPower}}
	_, err = claimCore(ctx, lockedStore{e}, owner, lease{}, owed, time.Now().Add(-time.Hour).UTC())
	require.NoError(t, err)

	host, _ := os.Hostname()
	other := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/other.fleet", StateID: "bbbb", Started: time.Now().UTC(), Interval: time.Second}
	err = claim(ctx, lockedStore{e}, other, time.Now().UTC())
	require.ErrorIs(t, err, errOtherState, "the dead executor's file owes s1 its power-on (a cycle its fleet took back after the abandon in p-old), yet an executor with another file was let in: the stale abandon gave it up")
}

// TestReview37ab_ClockSkewTakesLiveExecutorsLease (review 37 round 25):
// the lease says "one live executor per plan store, whatever state file
// or path (a symbolic link, another machine sharing the file)", and
// lapses "not renewed for three intervals and ten seconds", judged by
// comparing the At written on the renewing machine's clock with the
// claiming machine's clock. Two machines sharing the store whose clocks
// are 40 s apart (NTP not running on one: nothing in the README or the
// docs asks for synchronised clocks): the executor on the slow machine
// renews its lease every 5 s, yet each renewal is 40 s old on the other
// machine's clock, so an executor started there takes the store over at
// once from an executor that renewed a moment ago; the first, at its next
// renewal, finds the second's At 40 s in its future (more than the TTL:
// lapsed too) and takes it back, or stops (errOtherState) once the
// second started a reboot. Ground truth: the first executor's renewals,
// 1 s apart in real time. Expected: errOtherExecutor while the first
// renews (a lease judged by the claimer's own clock: the lease unchanged
// for the TTL as this machine measures it).
func TestReview37ab_ClockSkewTakesLiveExecutorsLease(t *testing.T) {
	e, _, _ := review37sWorld(t, 1)
	const skew = 40 * time.Second // the first machine's clock is this far behind
	first := lease{ID: newLeaseID(), Host: "machine-a", PID: 4242, State: "/shared/plans.db.fleet", StateID: "aaaa", Gen: "g1",
		Started: time.Now().Add(-time.Hour).UTC(), Interval: 5 * time.Second}
	require.NoError(t, claim(e.ctx, lockedStore{e}, first, time.Now().Add(-skew).UTC()), "the first executor's claim (its clock)")
	time.Sleep(time.Second)
	require.NoError(t, claim(e.ctx, lockedStore{e}, first, time.Now().Add(-skew).UTC()), "renewed a second later (its clock)")
	renewing(t, e, first, time.Second, -skew) // and every second after (its clock)

	host, _ := os.Hostname()
	second := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: "/var/lib/rebootctl/plans.db.fleet", StateID: "bbbb",
		Started: time.Now().UTC(), Interval: 5 * time.Second}
	err := claim(e.ctx, lockedStore{e}, second, time.Now().UTC())
	require.ErrorIs(t, err, errOtherExecutor, "an executor on a machine whose clock is %s ahead took the store over from one that renewed its lease a moment ago", skew)
}
