package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// metaLease is the key of the executor's lease in the plan store's meta
// bucket: one live executor per store, whatever state file or path (a
// symlink, another machine sharing the file) it was given.
const metaLease = "executor-lease"

// errOtherExecutor: another executor holds the store's lease.
var errOtherExecutor = errors.New("another executor runs on this plan store")

// lease is an executor's claim on a plan store, renewed at every pass and
// every interval during a long one (leaseHolder; a pass stops acting when
// a renewal fails: leasedPass), and checked before every first power-off
// and every write of a plan (lockedStore.fence). No machine judges
// another's claim by a time that machine's clock wrote: a claimer that
// finds another executor's claim waits, and takes the store over only
// once the claim stayed unchanged (no renewal: Seq, the record read) for
// three intervals and ten seconds as the claimer's own monotonic clock
// measures it (claimWait); it is refused as soon as it sees a renewal.
// An executor's renewal that finds another's claim fails at once (its
// store was taken over). So the lease holds however far apart the
// clocks of the machines sharing the store are. A
// claim of a process of this machine's boot and PID namespace (PIDNS)
// that no longer runs is free at once, and so is one its executor gave
// up when it stopped (release: At zero).
type lease struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// PIDNS names the machine's boot and the PID namespace PID is in
	// (pidNamespace); "" in a lease written by a rebootctl that recorded
	// none, or for a process not known to be this one. Only a lease of
	// this boot and this PID namespace is judged by its PID (lapsed):
	// two containers of one machine with host networking share its
	// hostname, not their PIDs.
	PIDNS string `json:"pid_ns,omitempty"`
	State string `json:"state"`
	// StateID names the fleet state file: its own ID (inventory's
	// Fleet.ID, kept in the file), or, for a lease whose executor knew
	// none, the file's device and inode on its machine (claim: fileID);
	// "" in a lease written by a rebootctl that recorded none (sameState
	// then falls back to hostname and path).
	StateID string `json:"state_id,omitempty"`
	// Gen is the fleet state file's generation (inventory.FleetIdentity)
	// when the claim was written: the executor advances it at every pass
	// before claiming, so that a copy of the file taken before its last
	// pass is told from the file (sameGeneration). "" in a lease written
	// by a rebootctl that recorded none, or whose file had none yet.
	Gen string `json:"gen,omitempty"`
	// prevGen is the generation before Gen of this executor's own file
	// (not stored: only what its file accepts, sameGeneration).
	prevGen string
	// Seq counts the writes of the store's lease: each claim and release
	// writes the one it read's plus one, so that a renewal changes the
	// record a waiting claimer watches even when the renewing machine's
	// clock stands still.
	Seq     uint64    `json:"seq,omitempty"`
	Started time.Time `json:"started"`
	// At is when the claim was written, by its machine's clock: for
	// operators only (no other machine compares it with its own clock);
	// zero once its executor gave it up (release).
	At       time.Time     `json:"at"`
	Interval time.Duration `json:"interval"`
}

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// free reports whether the claim is free to take at once, for a claimer
// on host in PID namespace pidNS (pidNamespace): there is none, its
// executor gave it up when it stopped (release), or it is a claim of a
// process of that same namespace that no longer runs. Any other claim is
// free only once it went unrenewed for its ttl as the claimer measures
// it (claimWait).
func (l lease) free(host, pidNS string) bool {
	if l.ID == "" || l.At.IsZero() {
		return true
	}
	return l.Host == host && l.PIDNS != "" && l.PIDNS == pidNS && l.PID > 0 && !processRuns(l.PID)
}

// ttl is how long the claim holds without a renewal: three intervals and
// ten seconds (an interval out of range, from hostile bytes, counts as
// maxLeaseInterval).
func (l lease) ttl() time.Duration {
	i := l.Interval
	if i < 0 || i > maxLeaseInterval {
		i = maxLeaseInterval
	}
	return 3*i + 10*time.Second
}

// maxLeaseInterval bounds the interval a lease read from the store is
// judged by.
const maxLeaseInterval = 24 * time.Hour

func (l lease) String() string {
	renewed := "last renewed " + l.At.UTC().Format(time.RFC3339)
	if l.At.IsZero() {
		renewed = "given up when it stopped"
	}
	return fmt.Sprintf("on %s, pid %d, fleet state %s, %s", clean(l.Host), l.PID, clean(l.State), renewed)
}

// fileID is the identity of the file at path on this machine (its
// device and inode), "" when it cannot be read: the StateID of a lease
// whose executor knows no ID of its fleet state file.
func fileID(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("file:%d:%d", uint64(st.Dev), uint64(st.Ino))
}

// pidNamespace names this process's boot of its machine and its PID
// namespace ("BOOTID/pid:[INODE]"), "" when either cannot be read: PIDs
// of two leases compare only when both name the same.
func pidNamespace() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == "" {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}

// processRuns reports whether process pid of this machine runs (a zombie
// does not).
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if i := strings.LastIndexByte(string(raw), ')'); i >= 0 && i+2 < len(raw) {
		return raw[i+2] != 'Z'
	}
	return true
}

// claim takes or renews me's lease on the store: it fails with
// errOtherExecutor while another executor's claim holds (claimWait: it
// waits up to that claim's ttl for a renewal), and, when it takes the
// store over from another executor's lease, with errStaleState or
// errOtherState as takeOver says. A lease with no StateID gets its
// file's (fileID). It neither reads nor writes the ledger of what the
// fleet state file owes (leaseHolder does).
func claim(ctx context.Context, s lockedStore, me lease, now time.Time) error {
	_, err := claimCore(ctx, s, me, lease{}, nil, now)
	return err
}

// claimCore is claim for an executor that took the store over from took
// (zero if none, or its own lease): when me's own lease names another
// fleet state file than me does now (its file was made or given its ID
// by the open), me is judged against took again. owed, when not nil, is
// what me's fleet state file owes (written to the ledger, metaOwed, when
// it changed); nil leaves the ledger as it is (the fleet is not open
// yet: the file the lease names keeps the one its last executor wrote).
// It returns the lease it replaced.
func claimCore(ctx context.Context, s lockedStore, me, took lease, owed []inventory.Owed, now time.Time) (lease, error) {
	return claimLease(ctx, s, me, took, owed, now, false)
}

// claimLease is claimCore; renewing says me held the store already (a
// landed claim of its executor): another executor's lease found then
// was written since, and ends me's claim at once (errOtherExecutor)
// whatever its times say, as any change of the record does.
func claimLease(ctx context.Context, s lockedStore, me, took lease, owed []inventory.Owed, now time.Time, renewing bool) (lease, error) {
	if me.StateID == "" {
		me.StateID = fileID(me.State)
	}
	if me.PIDNS == "" && me.PID == os.Getpid() {
		me.PIDNS = pidNamespace()
	}
	w := claimWait{me: me, renewing: renewing}
	for {
		cur, wait, err := claimOnce(ctx, s, me, took, owed, now, &w)
		if err != nil || wait <= 0 {
			return cur, err
		}
		if err := w.pause(ctx, s.e.errw, cur, wait); err != nil {
			return cur, err
		}
	}
}

// claimOnce is one open of the store for claimLease: it writes me's
// claim, or says how long to wait (w.judge) before reading again.
func claimOnce(ctx context.Context, s lockedStore, me, took lease, owed []inventory.Owed, now time.Time, w *claimWait) (lease, time.Duration, error) {
	var cur lease
	var wait time.Duration
	err := s.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(ctx, metaLease)
		if err != nil {
			return err
		}
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &cur)
		}
		if wait, err = w.judge(cur, raw); err != nil || wait > 0 {
			return err
		}
		from := cur
		if cur.ID == me.ID {
			from = lease{}
			if !sameState(cur, me) || sameGeneration(cur, me) != nil {
				from = took // its file is not the one its lease named: judged again
			}
		}
		if from.ID != "" && from.ID != me.ID {
			if err := takeOver(ctx, st, from, me); err != nil {
				return err
			}
		}
		if owed != nil {
			if err := putOwed(ctx, st, owed); err != nil {
				return err
			}
		}
		me.At = now
		me.Seq = cur.Seq + 1
		out, err := json.Marshal(me)
		if err != nil {
			return err
		}
		return st.PutMeta(ctx, metaLease, out)
	})
	return cur, wait, err
}

// takeOver is nil when me may take the store over from cur, the lease of
// another executor that no longer holds: with the same fleet state file
// (its ID) only if it is that file and not a copy taken before
// (sameGeneration: errStaleState); with another file only if cur's file
// owes no server anything (owedElsewhere: errOtherState).
func takeOver(ctx context.Context, st *plan.BoltStore, cur, me lease) error {
	if sameState(cur, me) {
		return sameGeneration(cur, me)
	}
	return owedElsewhere(ctx, st, cur, me)
}

// release gives up me's claim on the store at path when this executor
// stops, once its fleet is closed (nothing of it acts any more; checkStore
// is the executor's check of the store's file), with owed, what its
// fleet state file still owed when it stopped (nil: not known, the ledger
// is left as it is). The lease stays, naming its host and fleet state
// file (a successor with another file still finds what that file owes:
// owedElsewhere), but lapsed: an executor started next, on this machine
// in this process or on another machine, need not wait for it to lapse.
// A lease another executor took over is left alone. It is best effort,
// bounded by a few seconds (the executor's own context has ended): a
// lease not released lapses as before.
func release(path string, checkStore func(*os.File) error, me lease, owed []inventory.Owed) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := &env{ctx: ctx, store: path, errw: io.Discard, checkStore: checkStore}
	_ = lockedStore{r}.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(ctx, metaLease)
		if err != nil || len(raw) == 0 {
			return err
		}
		var cur lease
		if err := json.Unmarshal(raw, &cur); err != nil || cur.ID != me.ID {
			return err
		}
		if owed != nil {
			if err := putOwed(ctx, st, owed); err != nil {
				return err
			}
		}
		cur.At = time.Time{}
		cur.Seq++
		out, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return st.PutMeta(ctx, metaLease, out)
	})
}

// errOtherState: the store's last executor kept its jobs in another
// fleet state file, and that file still owes servers something (a job in
// flight, an undrain, a power-on, a power-off that may still land).
var errOtherState = errors.New("the last executor on this plan store used another fleet state file, and reboots it started are in flight")

// errStaleState: the fleet state file given has the ID of the one the
// store's last executor used, but not its generation: it is a copy of it
// taken before that executor's last pass (a backup, a VM snapshot, a
// copy on a standby machine), without the jobs and power cycles recorded
// since.
var errStaleState = errors.New("the fleet state file given is an older copy of the one the last executor on this plan store used")

// leaseLost says whether err, a claim's, means this executor must stop:
// another executor holds the store, or its fleet state file is not the
// one the store's jobs are in.
func leaseLost(err error) bool {
	return errors.Is(err, errOtherExecutor) || errors.Is(err, errOtherState) || errors.Is(err, errStaleState)
}

// sameGeneration is nil when me's fleet state file, the one cur names
// (sameState), is that file as cur's executor last left it: its
// generation, or the one before (that executor died between advancing
// the file and claiming), is cur's. A lease that records no generation
// (an older rebootctl's, or a file never advanced) accepts any.
func sameGeneration(cur, me lease) error {
	if cur.Gen == "" || me.Gen == cur.Gen || me.prevGen == cur.Gen {
		return nil
	}
	gen := me.Gen
	if gen == "" {
		gen = "none"
	}
	return fmt.Errorf("%w: %s (fleet state file ID %s) is at generation %s, and the last executor on this plan store (%s) recorded generation %s of that file: "+
		"this one is a copy taken before (a backup, a VM snapshot, a copy on a standby machine) and lacks the jobs and power cycles recorded since, so it is not used. "+
		"Start the executor with the file that executor used (%s on %s), not a copy of it; "+
		"if that file is lost, move this copy away and start the executor with a new fleet state file (--state NEWPATH): it then names the servers the lost file still owes something and how to give each up",
		errStaleState, clean(me.State), clean(me.StateID), clean(gen), cur, clean(cur.Gen), clean(cur.State), clean(cur.Host))
}

// sameState reports whether two leases name the same fleet state file:
// the same StateID (the file's own ID: whatever the machine's hostname,
// which a pod or a renamed VM changes, or the path it is given by); for a
// lease that records none (written by an older rebootctl), the same
// machine and the same file (symbolic links and relative paths resolved
// on this machine).
func sameState(a, b lease) bool {
	if a.StateID != "" && b.StateID != "" {
		return a.StateID == b.StateID
	}
	return a.Host == b.Host && canonicalPath(a.State) == canonicalPath(b.State)
}

// canonicalPath is path made absolute, its symbolic links resolved when
// it exists.
func canonicalPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Clean(path)
}

// owedElsewhere refuses to take the store over from cur, whose jobs are
// in another fleet state file, while a server is owed something only
// that file's executor does: a plan of any state (a canceled or failed
// one too) has a reboot in its job or cancel step (its job may run, or
// be created late), or the ledger cur's executor wrote (metaOwed, from
// its fleet: Fleet.Owed) lists a job not ended (an undrain owed after
// the power cycle) or a power cycle not settled (a power-on owed after
// the job gave up, a power-off that may still land). This executor knows
// nothing of those, and would start each again (a second drain, a
// second power cycle) or never finish them (a server left off, or
// drained). A server the operator abandoned in that plan (plan abandon),
// or, for a ledger entry, in a plan that reboots it after the ledger
// first listed the entry (the way out the refusal names leads there when
// a newer plan reboots the server now), is owed nothing: they took it over. An abandon
// older than the ledger entry gives it up only in the entry's own plan: a
// later job took the server back, and what it owes needs a new abandon.
func owedElsewhere(ctx context.Context, st *plan.BoltStore, cur, me lease) error {
	rawAbandoned, err := st.GetMeta(ctx, metaAbandoned)
	if err != nil {
		return err
	}
	abandoned := readAbandoned(rawAbandoned)
	plans, err := st.List(ctx)
	if err != nil {
		return err
	}
	inPlan := map[string]bool{} // server and plan: the plan reboots the server
	for _, p := range plans {
		for _, r := range p.Reboots {
			inPlan[r.ServerUUID+"\x00"+p.UUID] = true
		}
	}
	// given: the operator abandoned server in that plan, or, for an
	// entry of the ledger, in a plan of the store that reboots it, since
	// the ledger first listed the entry (AbandonSeen: the abandon the
	// store held then). An abandon older than the entry, in another
	// plan, does not: the job that took the server back after it owes
	// what the entry says.
	given := func(server, planUUID string, entry *owedEntry) bool {
		a, ok := abandoned[server]
		if !ok {
			return false
		}
		if planUUID != "" && a.Plan == planUUID {
			return true
		}
		return entry != nil && !a.At.Equal(entry.AbandonSeen) && inPlan[server+"\x00"+a.Plan]
	}
	var names []string
	listed := map[string]bool{}
	for _, p := range plans {
		// A canceled or failed plan counts too: a reboot of it still in
		// its job step (a power-on owed after an accepted power-off) or
		// its cancel step ends only through the job in cur's file.
		for _, r := range p.Reboots {
			if (r.Step == plan.StepJob || r.Step == plan.StepCancelJob) && !given(r.ServerUUID, p.UUID, nil) {
				names = append(names, fmt.Sprintf("%s (plan %s): its reboot job is in flight", r.ServerHostname, p.UUID))
				listed[r.ServerUUID+"\x00"+p.UUID] = true
			}
		}
	}
	owed, err := readOwed(ctx, st)
	if err != nil {
		return err
	}
	for i := range owed {
		o := &owed[i]
		if listed[o.Server+"\x00"+o.Plan] || given(o.Server, o.Plan, o) {
			continue
		}
		names = append(names, fmt.Sprintf("%s (plan %s): %s", o.Hostname, orAnyPlan(o.Plan), owedWhat(o.What)))
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s kept its jobs in %s on %s%s, and that file still owes these servers: %s. "+
		"Start the executor on %s with --state %s (or, if that machine was renamed or the file moved, wherever that file is now), so that it finishes them; "+
		"%sif that file is lost, give each of these servers up first (rebootctl plan abandon PLAN SERVER: no executor powers it again), "+
		"check each by hand (it may be drained, or off: undrain it, power it on), then start this executor again",
		errOtherState, clean(cur.Host), clean(cur.State), clean(cur.Host), stateIDs(cur, me), clean(strings.Join(names, "; ")), clean(cur.Host), clean(cur.State), olderLease(cur, me))
}

// owedWhat says, for an operator, what a fleet state file owes a server
// (inventory.Owed.What).
func owedWhat(what string) string {
	switch what {
	case inventory.OwedJob:
		return "its reboot job has not ended: it may still drain, power-cycle or undrain the server"
	case inventory.OwedPower:
		return "its power cycle has not settled: it may be off, or a power-off sent to it may still land; that file's executor powers it on"
	}
	return "owed " + what
}

// orAnyPlan names the plan of a ledger entry: "" when the job that owes
// the server was pruned (any plan of the server then gives it up).
func orAnyPlan(p string) string {
	if p == "" {
		return "not known: abandon it in any plan that reboots it"
	}
	return p
}

// stateIDs says the two fleet state files' IDs when both are known.
func stateIDs(cur, me lease) string {
	if cur.StateID == "" || me.StateID == "" {
		return ""
	}
	if strings.HasPrefix(me.StateID, "new:") {
		return fmt.Sprintf(" (fleet state file ID %s; the one given here, %s, is made new)", clean(cur.StateID), clean(me.State))
	}
	return fmt.Sprintf(" (fleet state file ID %s; the one given here, %s, has ID %s)", clean(cur.StateID), clean(me.State), clean(me.StateID))
}

// olderLease is what to do when cur, written by an older rebootctl,
// records no ID of its fleet state file: its hostname and path tell it.
func olderLease(cur, me lease) string {
	if cur.StateID != "" || canonicalPath(cur.State) != canonicalPath(me.State) {
		return ""
	}
	return fmt.Sprintf("if this machine is %s renamed and %s that very file (that executor's lease, from an older rebootctl, records no ID of the file), "+
		"start this executor once with the hostname %s (it records the file's ID; later starts need no hostname); ", clean(cur.Host), clean(me.State), clean(cur.Host))
}

// holds reports whether me still holds the store's lease (read only).
func holds(ctx context.Context, s lockedStore, me lease) error {
	var cur lease
	err := s.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(ctx, metaLease)
		if err != nil || len(raw) == 0 {
			return err
		}
		return json.Unmarshal(raw, &cur)
	})
	if err != nil {
		return err
	}
	if cur.ID != me.ID {
		return fmt.Errorf("%w (%s)", errOtherExecutor, cur)
	}
	return nil
}
