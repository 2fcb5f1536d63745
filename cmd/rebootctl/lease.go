package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
// no longer runs has lapsed at once.
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
		me.At = now
		out, err := json.Marshal(me)
		if err != nil {
			return err
		}
		return st.PutMeta(ctx, metaLease, out)
	})
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
