package fake

import (
	"sync"
	"time"
)

// Epoch is the instant a Clock made by NewClock starts at:
// 2026-01-01T00:00:00Z. Tests that print times stay stable with it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a manual clock. It moves only through Advance and Set, and it
// may be set backwards, as a real wall clock may jump.
//
// The zero value is a clock stopped at the zero time.Time; NewClock starts at
// Epoch. Not for production.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at t, or at Epoch if t is the zero time.
func NewClock(t time.Time) *Clock {
	if t.IsZero() {
		t = Epoch
	}
	return &Clock{now: t}
}

// Now returns the clock's time. Its method value (c.Now) fits every
// applier's Now field.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (which may be negative) and returns the new
// time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t, forwards or backwards.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
