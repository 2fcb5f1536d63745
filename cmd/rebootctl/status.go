package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// readExecutor returns the executor's last heartbeat and status from the
// store (nil if no executor ever wrote one).
func (e *env) readExecutor(st *plan.BoltStore) *executorStatus {
	raw, err := st.GetMeta(e.ctx, metaExecutor)
	if err != nil || raw == nil {
		return nil
	}
	var s executorStatus
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}

// staleAfter is how long after its last heartbeat an executor counts as
// gone: three passes and ten seconds.
func (s *executorStatus) staleAfter() time.Duration {
	return 3*s.Interval + 10*time.Second
}

// executorLines says when the executor was last seen, and warns when it
// is not running on this store.
func executorLines(s *executorStatus, store string, now time.Time) []string {
	if s == nil {
		return []string{fmt.Sprintf("WARNING: no executor has ever run on store %s: start one with \"rebootctl executor --store %s\"", store, store)}
	}
	if now.IsZero() { // no times (watch on a pipe compares without them)
		return []string{fmt.Sprintf("executor: on %s (pid %d)", s.Host, s.PID)}
	}
	ago := now.Sub(s.At).Round(time.Second)
	if ago < 0 {
		ago = 0
	}
	if ago > s.staleAfter() {
		return []string{fmt.Sprintf("WARNING: the executor was last seen %s ago (on %s, pid %d): nothing moves until one runs with --store %s", ago, s.Host, s.PID, store)}
	}
	line := fmt.Sprintf("executor: last seen %s ago on %s (pid %d)", ago, s.Host, s.PID)
	if s.PassError != "" {
		line += "; its last pass failed: " + s.PassError
	}
	return []string{line}
}

// serverNotes is what the executor knows of one server, a line each:
// where its power cycle stands, and its last BMC error with its class.
func serverNotes(s *executorStatus, uuid string, now time.Time) []string {
	if s == nil {
		return nil
	}
	for _, st := range s.Servers {
		if st.UUID != uuid {
			continue
		}
		var notes []string
		if st.Abandoned != "" {
			notes = append(notes, "abandoned by the operator ("+clean(st.Abandoned)+"): the executor never powers it on or off again; "+
				"while it is off (or a power-off sent to it before may still take effect) it counts offline and holds a slot of every plan's concurrency: "+
				"power it on by hand (its BMC's web UI, or at the machine), or create the plan with a higher rate (plan create -N/--rate)")
		}
		if st.Phase != "" {
			note := "power: " + st.Phase
			if !st.PhaseSince.IsZero() && !now.IsZero() {
				note += fmt.Sprintf(", for %s", now.Sub(st.PhaseSince).Round(time.Second))
			}
			notes = append(notes, note)
		}
		if e := st.LastError; e != nil {
			ago := ""
			if !now.IsZero() {
				ago = " " + now.Sub(e.At).Round(time.Second).String() + " ago"
			}
			notes = append(notes, fmt.Sprintf("BMC error [%s]%s: %s", e.Class, ago, e.Text()))
		}
		return notes
	}
	return nil
}
