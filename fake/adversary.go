package fake

import (
	"fmt"
	"time"

	"pgregory.net/rapid"
)

// The adversary: generators that draw a world that lies like real hardware,
// for rapid property tests (yours and ours). A safety invariant checked in
// such a world must be checked against ground truth (Power.WasOffDuring,
// Power.Truth, the stores' contents), never against what the code under
// test was told.

// MaxEarlyOff is the longest early Off DrawReport draws (Report.EarlyOff):
// a controller that waits for Off readings to settle
// (reboot.Config.OffSettle) must allow at least this much.
const MaxEarlyOff = 8 * time.Second

// MaxStale is the longest staleness DrawReport draws. A controller that
// bounds how stale a BMC's reports may be (reboot.Config.StaleReads) must
// allow at least this much for the invariants to hold in a drawn world.
const MaxStale = 20 * time.Second

// DrawReport draws how a Power reports its state: honest, stale by up to
// MaxStale, flapping, never transitioning, unknown (null, missing, Paused)
// for up to a third of reads, Off up to MaxEarlyOff before the hardware is
// off, or any combination.
func DrawReport(t *rapid.T, label string) Report {
	var r Report
	if rapid.Bool().Draw(t, label+".stale") {
		r.Stale = time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(MaxStale)).Draw(t, label+".staleFor"))
		r.Flap = rapid.Bool().Draw(t, label+".flap")
	}
	r.NoTransitioning = rapid.Bool().Draw(t, label+".noTransitioning")
	if rapid.Bool().Draw(t, label+".unknown") {
		r.Unknown = float64(rapid.IntRange(1, 33).Draw(t, label+".unknownPercent")) / 100
	}
	r.Seed = rapid.Uint64().Draw(t, label+".seed")
	if rapid.Bool().Draw(t, label+".early") {
		r.EarlyOff = time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(MaxEarlyOff)).Draw(t, label+".earlyOff"))
	}
	return r
}

// MaxLag is the longest power lag DrawPowerConfig draws (PowerConfig.Lag).
const MaxLag = 10 * time.Second

// MaxSoftDelay is the longest soft shutdown DrawPowerConfig draws
// (PowerConfig.SoftDelay). An accepted power-off of a drawn server takes
// effect at most MaxSoftDelay + MaxLag (+ MaxEarlyOff for the hardware)
// after it was sent, or never: a controller that bounds it (the inventory
// fleet's Options.ShutdownMax) must allow at least this much.
const MaxSoftDelay = 90 * time.Second

// DrawPowerConfig draws a server: its power lag (up to MaxLag, sub-second
// precision), a soft shutdown that is slow (up to MaxSoftDelay), ignored or
// unsupported, and its reporting (DrawReport).
func DrawPowerConfig(t *rapid.T, label string) PowerConfig {
	cfg := PowerConfig{
		Lag:       time.Duration(rapid.Int64Range(0, int64(MaxLag)).Draw(t, label+".lag")),
		SoftDelay: time.Duration(rapid.Int64Range(0, int64(MaxSoftDelay)).Draw(t, label+".softDelay")),
	}
	switch rapid.IntRange(0, 3).Draw(t, label+".soft") {
	case 1:
		cfg.IgnoreSoft = true
	case 2:
		cfg.SoftUnsupported = true
	}
	cfg.Report = DrawReport(t, label+".report")
	return cfg
}

// ClockMoveKind is a kind of clock move.
type ClockMoveKind int

const (
	// ClockStep lets real time pass (sub-second to minutes).
	ClockStep ClockMoveKind = iota
	// ClockJumpForward moves the wall clock ahead without real time passing
	// (up to a year: a misconfigured NTP server).
	ClockJumpForward
	// ClockJumpBack moves the wall clock back (a correction, or a clock
	// that ran fast).
	ClockJumpBack
	// ClockCorrect puts the wall clock back on real time.
	ClockCorrect
)

// ClockMove is one drawn move of a Clock.
type ClockMove struct {
	Kind ClockMoveKind
	D    time.Duration
}

// String describes the move.
func (m ClockMove) String() string {
	switch m.Kind {
	case ClockStep:
		return fmt.Sprintf("step %v", m.D)
	case ClockJumpForward:
		return fmt.Sprintf("wall clock jumps forward %v", m.D)
	case ClockJumpBack:
		return fmt.Sprintf("wall clock jumps back %v", m.D)
	}
	return "wall clock corrected"
}

// DrawClockMove draws a clock move: mostly real time passing in steps of
// any precision (nanoseconds to minutes); sometimes the wall clock jumps
// forward (seconds to a year) or back (up to an hour), or is corrected.
// With jumps false it only draws steps.
func DrawClockMove(t *rapid.T, label string, jumps bool) ClockMove {
	k := ClockStep
	if jumps {
		k = ClockMoveKind(rapid.IntRange(0, 9).Draw(t, label+".kind"))
		if k > ClockCorrect {
			k = ClockStep
		}
	}
	switch k {
	case ClockJumpForward:
		d := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour}).Draw(t, label+".forward")
		return ClockMove{Kind: k, D: d + time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, label+".forwardNanos"))}
	case ClockJumpBack:
		return ClockMove{Kind: k, D: time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, label+".back"))}
	case ClockCorrect:
		return ClockMove{Kind: k}
	}
	scale := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second}).Draw(t, label+".scale")
	return ClockMove{Kind: ClockStep, D: scale * time.Duration(rapid.IntRange(1, 12).Draw(t, label+".steps"))}
}

// Apply makes the move on c and returns the new wall time.
func (c *Clock) Apply(m ClockMove) time.Time {
	switch m.Kind {
	case ClockJumpForward:
		return c.Jump(m.D)
	case ClockJumpBack:
		return c.Jump(-m.D)
	case ClockCorrect:
		c.Correct()
		return c.Now()
	}
	return c.Advance(m.D)
}
