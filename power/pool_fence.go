package power

// fenceHold is the back-off window's fence pass a call took
// (fenceTriedLocked), guarded by Pool.mu: a call that ends without
// sending its power command to the BMC (not tried, its caller gone or
// its deadline ended while it waited, ErrNotSent) gives it back, so
// that the window's one fence is one that reached the BMC.
type fenceHold struct {
	e   *entry // nil: no pass held
	gen uint64 // e.fenceGen when the pass was taken
}

// take notes that the call took e's fence pass (p.mu held). A nil h
// notes nothing.
func (h *fenceHold) take(e *entry) {
	if h != nil {
		h.e, h.gen = e, e.fenceGen
	}
}

// giveBackFenceLocked gives back the fence pass h holds, if it is still
// the one of its entry's window (p.mu held): the next fence of the
// window is tried. A nil h, or one holding none, does nothing.
func (p *Pool) giveBackFenceLocked(h *fenceHold) {
	if h == nil || h.e == nil {
		return
	}
	if h.e.fenced && h.e.fenceGen == h.gen {
		h.e.fenced = false
	}
	h.e = nil
}
