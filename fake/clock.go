package fake

import (
	"sync"
	"time"
)

// Epoch is the instant a Clock made by NewClock starts at:
// 2026-01-01T00:00:00Z. Tests that print times stay stable with it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a manual clock with two readings, as a real machine has:
//
//   - Now is the wall clock a controller reads. It moves with time, and it
//     also jumps: Jump and Set move it forwards or backwards without any real
//     time passing (NTP stepping a clock that ran ahead, and correcting it
//     again).
//   - Real is the true time: it only moves forwards, and only through
//     Advance. Simulated hardware (NewPower(clk.Real, …)) lives on it, so a
//     test can ask what really happened at a real instant whatever the wall
//     clock claimed. Monotonic is the real time elapsed since the clock was
//     made, as a process's monotonic clock reports it.
//
// The zero value is a clock stopped at the zero time.Time; NewClock starts
// both readings at Epoch. Not for production.
type Clock struct {
	mu     sync.Mutex
	real   time.Time
	offset time.Duration // wall = real + offset
	start  time.Time
	jumps  int
}

// NewClock returns a clock whose readings both start at t, or at Epoch if t
// is the zero time.
func NewClock(t time.Time) *Clock {
	if t.IsZero() {
		t = Epoch
	}
	return &Clock{real: t, start: t}
}

// Now returns the wall clock's time. Its method value (c.Now) fits every
// applier's Now field.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real.Add(c.offset)
}

// Real returns the true time, which never jumps. Use it (c.Real) as the
// time source of simulated hardware and as the time line of ground truth.
func (c *Clock) Real() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real
}

// Monotonic returns the real time elapsed since the clock was made: what
// time.Since on a monotonic reading returns in a real process. Its method
// value fits a Reconciler's Monotonic field.
func (c *Clock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real.Sub(c.start)
}

// Advance lets d of real time pass (both readings move by d) and returns
// the new wall time. A negative d is a backwards jump of the wall clock
// alone (Jump), kept for callers that used Advance for it.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d < 0 {
		c.offset += d
		c.jumps++
	} else {
		c.real = c.real.Add(d)
	}
	return c.real.Add(c.offset)
}

// Jump moves the wall clock by d, forwards or backwards, while no real time
// passes, and returns the new wall time.
func (c *Clock) Jump(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	if d != 0 {
		c.jumps++
	}
	return c.real.Add(c.offset)
}

// Correct puts the wall clock back on real time (an NTP correction after
// jumps) and returns by how much it moved.
func (c *Clock) Correct() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := -c.offset
	c.offset = 0
	if d != 0 {
		c.jumps++
	}
	return d
}

// Set moves the wall clock to t, forwards or backwards, while no real time
// passes.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := t.Sub(c.real.Add(c.offset)); d != 0 {
		c.offset += d
		c.jumps++
	}
}

// Skew returns how far the wall clock is ahead of real time (negative:
// behind).
func (c *Clock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Jumps counts the wall clock's jumps so far.
func (c *Clock) Jumps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jumps
}
