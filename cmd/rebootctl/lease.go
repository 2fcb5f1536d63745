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

	"github.com/rebootkit/rebootkit/plan"
)

// metaLease is the key of the executor's lease in the plan store's meta
// bucket: one live executor per store, whatever state file or path (a
// symlink, another machine sharing the file) it was given.
const metaLease = "executor-lease"

// errOtherExecutor: another executor holds the store's lease.
var errOtherExecutor = errors.New("another executor runs on this plan store")

// lease is an executor's claim on a plan store, renewed at every pass and
// every interval during a long one, and checked before every first
// power-off. A claim not renewed for three intervals
// and ten seconds has lapsed; a claim of a process of this machine that
// no longer runs has lapsed at once, and so has one its executor gave up
// when it stopped (release).
type lease struct {
	ID       string        `json:"id"`
	Host     string        `json:"host"`
	PID      int           `json:"pid"`
	State    string        `json:"state"`
	Started  time.Time     `json:"started"`
	At       time.Time     `json:"at"`
	Interval time.Duration `json:"interval"`
}

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lapsed reports whether the claim no longer holds at now.
func (l lease) lapsed(now time.Time, host string) bool {
	if l.ID == "" {
		return true
	}
	if l.Host == host && l.PID > 0 && !processRuns(l.PID) {
		return true
	}
	ttl := 3*l.Interval + 10*time.Second
	return now.Sub(l.At) > ttl || l.At.Sub(now) > ttl // a clock far off either way cannot hold it for ever
}

func (l lease) String() string {
	return fmt.Sprintf("on %s, pid %d, fleet state %s, last renewed %s", clean(l.Host), l.PID, clean(l.State), l.At.UTC().Format(time.RFC3339))
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

// claim takes or renews me's lease on the store, in one store operation:
// it fails with errOtherExecutor while another executor's claim holds.
func claim(ctx context.Context, s lockedStore, me lease, now time.Time) error {
	return s.with(func(st *plan.BoltStore) error {
		raw, err := st.GetMeta(ctx, metaLease)
		if err != nil {
			return err
		}
		var cur lease
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &cur)
		}
		if cur.ID != me.ID && !cur.lapsed(now, me.Host) {
			return fmt.Errorf("%w (%s): stop it first, or wait until its lease lapses (%s after its last renewal)", errOtherExecutor, cur, 3*cur.Interval+10*time.Second)
		}
		if cur.ID != "" && cur.ID != me.ID && !sameState(cur, me) {
			if err := inFlightElsewhere(ctx, st, cur); err != nil {
				return err
			}
		}
		me.At = now
		out, err := json.Marshal(me)
		if err != nil {
			return err
		}
		return st.PutMeta(ctx, metaLease, out)
	})
}

// release gives up me's claim on the store at path when this executor
// stops, once its fleet is closed (nothing of it acts any more; checkStore
// is the executor's check of the store's file). The lease stays, naming
// its host and fleet state file (a successor with another file still
// finds the reboots in flight there: inFlightElsewhere), but lapsed: an
// executor started next, on this machine in this process or on another
// machine, need not wait for it to lapse. A lease another executor took
// over is left alone. It is best effort, bounded by a few seconds (the
// executor's own context has ended): a lease not released lapses as
// before.
func release(path string, checkStore func(*os.File) error, me lease) {
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
		cur.At = time.Time{}
		out, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return st.PutMeta(ctx, metaLease, out)
	})
}

// errOtherState: the store's last executor kept its jobs in another
// fleet state file, and reboots of a running or stopped plan are in
// flight there.
var errOtherState = errors.New("the last executor on this plan store used another fleet state file, and reboots it started are in flight")

// sameState reports whether two leases name the same fleet state file:
// the same machine and the same file (symbolic links and relative paths
// resolved on this machine).
func sameState(a, b lease) bool {
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

// inFlightElsewhere refuses to take the store over from cur, whose jobs
// are in another fleet state file, while a running or stopped plan has a
// reboot in its job step: this executor knows nothing of those jobs, and
// would start each again (a second drain, a second power cycle of a
// server the first may have left off).
func inFlightElsewhere(ctx context.Context, st *plan.BoltStore, cur lease) error {
	plans, err := st.List(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range plans {
		if p.State.Finished() {
			continue // canceled or ended: its reboots end without their jobs
		}
		for _, r := range p.Reboots {
			if r.Step == plan.StepJob || r.Step == plan.StepCancelJob {
				names = append(names, fmt.Sprintf("%s (plan %s)", r.ServerHostname, p.UUID))
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s kept its jobs in %s on %s, and the reboots of %s are in flight there. "+
		"Start the executor on %s with --state %s, so that it resumes them; if that file is lost, cancel those plans first "+
		"(rebootctl plan cancel PLAN) and check each server by hand (it may be drained, or off)",
		errOtherState, clean(cur.Host), clean(cur.State), clean(cur.Host), clean(strings.Join(names, ", ")), clean(cur.Host), clean(cur.State))
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
