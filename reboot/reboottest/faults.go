package reboottest

import (
	"errors"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// retryCap is the reboot package's bound on the back-off between calls
// answering a run of unsure readings: a BMC that fails every call is tried
// at least once an hour (reboot/decide_unsure.go).
const retryCap = time.Hour

// faultQueue follows the one-shot faults the state machine queues on the
// fake BMC (fake.Power.FailNext), to know which calls took one: a queued
// fault is used by the next call of its op, whatever the world does
// meanwhile, so a power-off long after the fault was drawn may fail by
// it. The held-host bounds (heldOffBound) grow by what each costs.
type faultQueue struct {
	pw *fake.Power
	// queued counts the faults per op not used yet.
	queued map[fake.Op]int
	// seen is how many of pw.Calls() were matched against the queue.
	seen int
	// took holds the Seq of each call that used a queued fault.
	took map[int]bool
}

func newFaultQueue(pw *fake.Power) *faultQueue {
	return &faultQueue{pw: pw, queued: map[fake.Op]int{}, took: map[int]bool{}}
}

// failNext queues f for the next call of op (fake.Power.FailNext).
func (q *faultQueue) failNext(op fake.Op, f fake.Fault) {
	q.sync()
	q.pw.FailNext(op, f)
	q.queued[op]++
}

// sync matches the calls made since the last sync against the queue: the
// fake uses a queued fault for every call of its op made once it is
// queued (calls are only made within passes, and failNext syncs first).
func (q *faultQueue) sync() []fake.Call {
	calls := q.pw.Calls()
	for _, c := range calls[q.seen:] {
		if q.queued[c.Op] > 0 {
			q.queued[c.Op]--
			q.took[c.Seq] = true
		}
	}
	q.seen = len(calls)
	return calls
}

// extra is how much longer than heldOffBound the queued faults may keep a
// held host on, counted from from: the reboot controller repeats a power
// call that failed (busy, failed, timed out, or unsupported) no later than
// SoftTimeout + StaleReads doubled with every busy or failed power call in
// a row before it (Call.Errors; at most retryCap; RetryDelay, and its
// doubling by the calls in a row that got no answer, Call.Fails, are
// shorter: reboot/doc.go), and its next pass comes within PollInterval.
// Each power call that used a queued fault and failed, whose retry could
// be due after from, adds that; each state read that used one after from
// adds a pass (PollInterval: its reading is unknown).
func (q *faultQueue) extra(from time.Time, stale time.Duration) time.Duration {
	dc := reboot.DefaultConfig()
	var d time.Duration
	errs := 0 // power calls busy or failed in a row (Call.Errors)
	for _, c := range q.sync() {
		if c.Op == fake.OpState {
			if q.took[c.Seq] && !c.At.Before(from) {
				d += dc.PollInterval
			}
			continue
		}
		switch {
		case c.Err == nil, errors.Is(c.Err, power.ErrUnsupported):
			errs = 0
		default:
			errs++
		}
		if !q.took[c.Seq] || c.Err == nil {
			continue
		}
		retry := min((dc.SoftTimeout+stale)<<min(max(errs-1, 0), 16), retryCap)
		if c.At.Add(retry).After(from) {
			d += retry + dc.PollInterval
		}
	}
	return d
}
