package reboottest

import (
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
)

// restarts keeps the state machine's restarts of the controller inside
// assumption A3 (reboot/doc.go): "A restart (or a new leader) whose wall
// clock runs J ahead of the one that wrote a Status.ActingSince dates the
// calls it bounds J early" and is not handled (a press whose answer was
// lost is counted landed too soon, and a power-off sent then can power a
// held host on). A Reconciler takes its start on the wall clock at its
// first pass; a restart whose first pass would run with the wall clock
// further ahead of real time (fake.Clock.Skew) than it was for the writer
// of the stored ActingSince is not made: the Reconciler that ran before it
// goes on. Nothing else is excluded: a restart whose clock runs behind, or
// with no ActingSince stored, is made, and every check stays as it is.
type restarts struct {
	clk *fake.Clock
	// prev is the Reconciler that ran before the pending restart (nil
	// before the first pass, or once the restart's first pass ran).
	prev *reboot.Reconciler
	// fresh: the current Reconciler has not run a pass yet.
	fresh bool
	// skew is the current Reconciler's start skew (at its first pass).
	skew time.Duration
	// acting maps each ActingSince value stored to the skew of the
	// Reconciler that first wrote it: a later one writes the same value
	// back when it took it from the status, and its meaning is then the
	// first writer's.
	acting map[time.Time]time.Duration
}

func newRestarts(clk *fake.Clock) *restarts {
	return &restarts{clk: clk, fresh: true, acting: map[time.Time]time.Duration{}}
}

// restart returns next, the restarted Reconciler, remembering cur (the
// one that ran passes) in case next's first pass would be outside A3.
func (s *restarts) restart(cur, next *reboot.Reconciler) *reboot.Reconciler {
	if !s.fresh {
		s.prev = cur
	}
	s.fresh = true
	return next
}

// firstPass is called before every pass with the stored ActingSince: it
// returns the Reconciler to run it, cur, or, when cur is a restart whose
// first pass would run with the wall clock ahead of the writer of acting,
// the Reconciler that ran before it.
func (s *restarts) firstPass(cur *reboot.Reconciler, acting time.Time) *reboot.Reconciler {
	if !s.fresh {
		return cur
	}
	skew := s.clk.Skew()
	if w, ok := s.acting[acting]; ok && !acting.IsZero() && s.prev != nil && skew > w {
		cur = s.prev // the restart is not made
	} else {
		s.skew = skew
	}
	s.prev, s.fresh = nil, false
	return cur
}

// written notes the ActingSince stored after a pass.
func (s *restarts) written(acting time.Time) {
	if _, ok := s.acting[acting]; !ok && !acting.IsZero() {
		s.acting[acting] = s.skew
	}
}
