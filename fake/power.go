package fake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Compile-time checks: *Power is a power.Controller and a power.Resetter.
var (
	_ power.Controller = (*Power)(nil)
	_ power.Resetter   = (*Power)(nil)
)

// Op names a call on a power controller.
type Op int

const (
	// OpState is a State call.
	OpState Op = iota
	// OpOn is an On call.
	OpOn
	// OpOff is an Off call (the mode is in Call.Mode).
	OpOff
	// OpReset is a Reset call (power.Resetter).
	OpReset
)

// String returns "state", "on", "off" or "reset".
func (o Op) String() string {
	switch o {
	case OpState:
		return "state"
	case OpOn:
		return "on"
	case OpOff:
		return "off"
	case OpReset:
		return "reset"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// FaultKind is the kind of error a Fault injects.
type FaultKind int

const (
	// FaultNone injects nothing: the call behaves normally.
	FaultNone FaultKind = iota
	// FaultUnsupported returns an error matching power.ErrUnsupported.
	FaultUnsupported
	// FaultBusy returns an error matching power.ErrBusy.
	FaultBusy
	// FaultFailed returns an error matching power.ErrFailed.
	FaultFailed
	// FaultTimeout returns an error wrapping context.DeadlineExceeded.
	FaultTimeout
)

// String returns the kind's name.
func (k FaultKind) String() string {
	switch k {
	case FaultNone:
		return "none"
	case FaultUnsupported:
		return "unsupported"
	case FaultBusy:
		return "busy"
	case FaultFailed:
		return "failed"
	case FaultTimeout:
		return "timeout"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is an injected failure of one call.
type Fault struct {
	// Kind is the error to return.
	Kind FaultKind
	// Applied makes the command take effect although the call fails, as a
	// BMC does when the reply is lost or comes after the caller's deadline.
	// It is ignored for OpState.
	Applied bool
	// Late, with Applied, makes the command take effect Late after the
	// call instead of during it, as a BMC that carries out a call whose
	// answer was lost some time after the caller gave up (assumption A5
	// of package reboot bounds Late by its Config.LostLanding): calls and
	// readings made meanwhile see the state before it.
	Late time.Duration
}

// lateCmd is a command a Fault with Late carries out at at.
type lateCmd struct {
	at   time.Time
	op   Op
	mode power.Mode
}

// Call is one recorded call on a Power.
type Call struct {
	// Seq numbers calls from 1 in the order they were made.
	Seq int
	// At is the clock's time of the call.
	At time.Time
	// Op is the operation; Mode is meaningful for OpOff only.
	Op   Op
	Mode power.Mode
	// Reported is what State returned (OpState only).
	Reported power.State
	// Err is the error the call returned.
	Err error
}

// Transition is one change of the power state a Power reports.
type Transition struct {
	// At is the clock's time the change took effect.
	At time.Time
	// From and To are the states before and after.
	From, To power.State
}

// PowerConfig configures a Power. The zero value is a server that is on and
// obeys every command at once.
type PowerConfig struct {
	// Initial is the state at creation: power.StateOn (also for the zero
	// value) or power.StateOff.
	Initial power.State
	// Lag is how long the state reads power.StateTransitioning after the
	// power really starts to change. Zero: the change is instant.
	Lag time.Duration
	// SoftDelay is how long the operating system takes to shut down after
	// a soft Off, before the power starts to go.
	SoftDelay time.Duration
	// IgnoreSoft makes soft Off succeed and do nothing, like an OS that
	// ignores the ACPI power button.
	IgnoreSoft bool
	// SoftUnsupported makes soft Off fail with power.ErrUnsupported.
	SoftUnsupported bool
	// Faults, if set, is asked before every call (after the one-shot faults
	// queued with FailNext) and may inject a fault. It is called with the
	// lock held and must not call back into the Power.
	Faults func(c Call) Fault
	// Report says how State reports the power: the zero value reports
	// honestly (Transitioning while a change is under way). See Report.
	Report Report
	// Button makes some calls presses of the power button, which toggle
	// the hardware (see ButtonKind). Zero: none.
	Button ButtonKind
}

// Report configures the lies a Power tells through State, separately from
// what its hardware does (the ground truth, see Truth, WasOnAt,
// WasOffDuring, HardwareOn). Real BMCs lie in these ways; the modes combine.
type Report struct {
	// Stale makes State report the power as it was up to Stale ago, as
	// sushy-tools (a reset applied 1 to 11 s later, the old state reported
	// meanwhile) and iDRAC do after a reset. Within Stale after a change a
	// read reports the state from before it. Zero: no staleness.
	Stale time.Duration
	// Flap makes the age of every read random in [0, Stale] instead of
	// Stale, so that reads flap between the old and the new state.
	Flap bool
	// NoTransitioning never reports StateTransitioning: while a change is
	// under way the state from before it is reported (most BMCs never say
	// PoweringOn or PoweringOff).
	NoTransitioning bool
	// EarlyOff makes the BMC report a power-off complete up to EarlyOff
	// before the hardware is off, as some BMCs do (Off at once after
	// ForceOff while the hardware runs seconds more): the hardware of every
	// commanded power-off goes off EarlyOff after the BMC shows Off. It
	// then goes off in any case: a power-on (by command or out of band)
	// meanwhile first completes the power-off (reboot's assumption A1).
	EarlyOff time.Duration
	// Unknown is the probability (0 to 1) that a read reports
	// StateUnknown without an error: PowerState null, missing or Paused.
	// UnknownAs chooses which (see UnknownKind) for BMC emulators.
	Unknown float64
	// Seed seeds the random choices of Flap and Unknown, so that a run
	// repeats exactly.
	Seed uint64
}

// UnknownKind is how a BMC shows a state it cannot tell.
type UnknownKind int

const (
	// UnknownNull is PowerState: null.
	UnknownNull UnknownKind = iota
	// UnknownMissing leaves PowerState out.
	UnknownMissing
	// UnknownPaused is PowerState: "Paused".
	UnknownPaused
)

// Cause says why the hardware's power changed.
type Cause int

const (
	// CauseCommand: a command sent through On or Off.
	CauseCommand Cause = iota
	// CauseOutOfBand: ForceState, OutOfBandOn or OutOfBandOff: a person
	// pressing the button, the BMC's power-restore policy, a crash.
	CauseOutOfBand
)

// String returns "command" or "out-of-band".
func (c Cause) String() string {
	if c == CauseOutOfBand {
		return "out-of-band"
	}
	return "command"
}

// TruthChange is one change of the hardware's real power: from At on, the
// hardware is On (running) or not.
//
// The ground truth is conservative for fencing: the hardware counts as
// running from the instant a power-on starts until the instant a power-off
// completes, so "off at t" always means nothing could run at t.
type TruthChange struct {
	At    time.Time
	On    bool
	Cause Cause
}

type pending struct {
	target power.State
	start  time.Time // the power starts to change; reads Transitioning from here
	at     time.Time // the change is complete
	soft   bool
	shown  bool // Transitioning has been recorded
}

// Power is a simulated power controller for one server. Its state changes
// only as its Clock moves: a command schedules a change, and every call
// settles whatever became due. It records every call and every state change.
//
// Semantics: a command asking for the state the server is in or already moving
// to succeeds and changes nothing; a hard Off replaces a soft Off under way; On
// while the server is on cancels an Off under way; On while off (or going
// off) schedules power-on. Not for production.
type Power struct {
	mu      sync.Mutex
	now     func() time.Time
	cfg     PowerConfig
	settled power.State
	pend    *pending
	queue   map[Op][]Fault
	calls   []Call
	trans   []Transition
	shown   power.State // last state recorded in trans (or initial)
	initial power.State
	truth   []TruthChange
	on      bool // the hardware's real state (last of truth, or initial)
	rnd     *rand.Rand
	lastUnk UnknownKind
	// resets are the instants the hardware was reset (ground truth).
	resets []time.Time
	// offAt is when the hardware of a power-off the BMC already shows as
	// complete goes off (Report.EarlyOff); zero if none is under way.
	offAt time.Time
	// late are the commands of Faults with Late still to be carried out,
	// in the order of their at.
	late []lateCmd
}

// NewPower returns a simulated power controller that reads time from now:
// pass a Clock's Real (the true time line, which never jumps), so that
// its ground truth (Truth, WasOnAt, WasOffDuring) is on real time; the
// controllers under test read the Clock's Now.
func NewPower(now func() time.Time, cfg PowerConfig) *Power {
	initial := cfg.Initial
	if initial != power.StateOff {
		initial = power.StateOn
	}
	return &Power{now: now, cfg: cfg, settled: initial, shown: initial, initial: initial,
		on: initial == power.StateOn, queue: map[Op][]Fault{},
		rnd: rand.New(rand.NewPCG(cfg.Report.Seed, 0x5eed))}
}

// FailNext queues a one-shot fault for the next call of op. Queued faults
// are used in order, before PowerConfig.Faults is asked.
func (p *Power) FailNext(op Op, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue[op] = append(p.queue[op], f)
}

// SetConfig replaces the configuration (Initial is ignored). A change
// already scheduled keeps its timing; the random source is kept unless
// the seed changes.
func (p *Power) SetConfig(cfg PowerConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cfg.Report.Seed != p.cfg.Report.Seed {
		p.rnd = rand.New(rand.NewPCG(cfg.Report.Seed, 0x5eed))
	}
	p.cfg = cfg
}

// SetReport replaces how the state is reported (see Report), leaving the
// rest of the configuration alone: the world "starts to behave" in a
// liveness phase with SetReport(Report{}).
func (p *Power) SetReport(r Report) {
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	cfg.Report = r
	p.SetConfig(cfg)
}

// ForceState sets the state at once, bypassing every command and fault:
// someone pressed the power button, or the server crashed. Any scheduled
// change is dropped. StateOn and StateOff change the hardware (an
// out-of-band event in the ground truth); other states are ignored.
func (p *Power) ForceState(s power.State) {
	if s != power.StateOn && s != power.StateOff {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.settle(now)
	p.pend = nil
	p.settled = s
	p.record(now, s)
	p.completeOff(now)
	p.setTruth(now, s == power.StateOn, CauseOutOfBand)
}

// completeOff ends a power-off the BMC already shows as complete
// (Report.EarlyOff): the hardware goes off at t or when it was due,
// whichever is first.
func (p *Power) completeOff(t time.Time) {
	if p.offAt.IsZero() {
		return
	}
	if p.offAt.Before(t) {
		t = p.offAt
	}
	p.offAt = time.Time{}
	p.setTruth(t, false, CauseCommand)
}

// OutOfBandOn powers the hardware on at once, as a person at the console
// or a power-restore policy after a power loss does. Same as
// ForceState(power.StateOn).
func (p *Power) OutOfBandOn() { p.ForceState(power.StateOn) }

// OutOfBandOff cuts the power at once (a crash, a pulled cable). Same as
// ForceState(power.StateOff).
func (p *Power) OutOfBandOff() { p.ForceState(power.StateOff) }

// State reports the current state.
func (p *Power) State(ctx context.Context) (power.State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.begin(OpState, power.ModeSoft)
	if err := ctx.Err(); err != nil {
		return p.end(c, err)
	}
	if f := p.fault(c); f.Kind != FaultNone {
		return p.end(c, p.faultErr(c, f))
	}
	c.Reported, p.lastUnk = p.reported(c.At)
	return p.end(c, nil)
}

// Reading is what an emulator shows for one read of a Power (see Read).
type Reading struct {
	// State is the reported state, with the configured lies.
	State power.State
	// Unknown says how an unknown State shows (null, missing or Paused).
	Unknown UnknownKind
	// Target is where a change under way leads, when State is
	// StateTransitioning (PoweringOn or PoweringOff).
	Target power.State
}

// Read is State for protocol emulators (redfishtest.BMC, ipmitest.BMC): the same
// reported state, lies, faults and call record, plus how to show it.
func (p *Power) Read(ctx context.Context) (Reading, error) {
	st, err := p.State(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	rd := Reading{State: st, Unknown: p.lastUnk, Target: power.StateUnknown}
	if st == power.StateTransitioning {
		rd.Target = power.StateOn
		if p.pend != nil && p.pend.target == power.StateOff || p.pend == nil && p.settled == power.StateOn {
			rd.Target = power.StateOff
		}
	}
	return rd, err
}

// HardwareOn reports whether the hardware runs now (ground truth), which
// is what a physical power button toggles.
func (p *Power) HardwareOn() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return p.on
}

// reported returns what a read at now reports, with the configured lies.
func (p *Power) reported(now time.Time) (power.State, UnknownKind) {
	r := p.cfg.Report
	if r.Unknown > 0 && p.rnd.Float64() < r.Unknown {
		return power.StateUnknown, UnknownKind(p.rnd.IntN(3))
	}
	var age time.Duration
	if r.Stale > 0 {
		age = r.Stale
		if r.Flap {
			age = time.Duration(p.rnd.Int64N(int64(r.Stale) + 1))
		}
	}
	if age == 0 {
		// The present, also when the Power's clock went backwards.
		s := p.current()
		if s == power.StateTransitioning && r.NoTransitioning {
			s = p.settled // a change under way is not complete: the old state
		}
		return s, UnknownNull
	}
	at := now.Add(-age)
	s := p.shownAt(at)
	if s == power.StateTransitioning && r.NoTransitioning {
		s = p.settledBefore(at)
	}
	return s, UnknownNull
}

// shownAt returns the honest reported state at t (from the recorded
// transitions; before the first one, the initial state).
func (p *Power) shownAt(t time.Time) power.State {
	s := p.initial
	for i := len(p.trans) - 1; i >= 0; i-- {
		if !p.trans[i].At.After(t) {
			return p.trans[i].To
		}
	}
	return s
}

// settledBefore returns the last on/off state shown at or before t.
func (p *Power) settledBefore(t time.Time) power.State {
	for i := len(p.trans) - 1; i >= 0; i-- {
		tr := p.trans[i]
		if tr.At.After(t) {
			continue
		}
		if tr.To == power.StateOn || tr.To == power.StateOff {
			return tr.To
		}
	}
	return p.initial
}

// On powers the server on.
func (p *Power) On(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.begin(OpOn, power.ModeSoft)
	_, err := p.command(ctx, c, func() error { return p.act(c) })
	return err
}

// act carries out the command of c at c.At.
func (p *Power) act(c Call) error {
	switch c.Op {
	case OpOn:
		return p.actOn(c)
	case OpOff:
		return p.actOff(c)
	case OpReset:
		return p.actReset(c)
	}
	return nil
}

func (p *Power) actOn(c Call) error {
	switch {
	case p.cfg.Button == ButtonAll:
		p.press(c.At)
	case p.settled == power.StateOn:
		p.pend = nil // cancels an Off under way; the server stays on
		p.record(c.At, power.StateOn)
	case p.pend != nil && p.pend.target == power.StateOn:
		// already coming on
	default:
		p.schedule(power.StateOn, c.At, false)
	}
	return nil
}

// Off powers the server off in mode m.
func (p *Power) Off(ctx context.Context, m power.Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.begin(OpOff, m)
	_, err := p.command(ctx, c, func() error { return p.act(c) })
	return err
}

func (p *Power) actOff(c Call) error {
	m := c.Mode
	if p.pressesOff(m) {
		p.press(c.At)
		return nil
	}
	goingOff := p.pend != nil && p.pend.target == power.StateOff
	if p.settled == power.StateOff && !(p.pend != nil && p.pend.target == power.StateOn) {
		return nil // already off
	}
	if m == power.ModeSoft {
		if p.cfg.SoftUnsupported {
			return &power.Error{Op: power.OpName(m), Class: power.ClassUnsupported, Message: "fake: soft power-off not supported"}
		}
		if goingOff || p.cfg.IgnoreSoft {
			return nil
		}
		p.schedule(power.StateOff, c.At.Add(p.cfg.SoftDelay), true)
		return nil
	}
	if goingOff && !p.pend.soft {
		return nil // a hard off is already under way
	}
	p.schedule(power.StateOff, c.At, false)
	return nil
}

// Reset restarts the server without a power-off (power.Resetter): the
// hardware stays on, and the reset is in the ground truth (Resets). A
// server whose hardware is off, or whose power is changing, is not reset:
// the call fails (power.ErrFailed) and changes nothing.
func (p *Power) Reset(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.begin(OpReset, power.ModeHard)
	_, err := p.command(ctx, c, func() error { return p.act(c) })
	return err
}

func (p *Power) actReset(c Call) error {
	if !p.on || p.pend != nil || !p.offAt.IsZero() {
		return &power.Error{Op: "reset", Class: power.ClassFailed, Message: "fake: the server is not on: not reset"}
	}
	p.resets = append(p.resets, c.At)
	return nil
}

// Resets returns the instants the hardware was reset (ground truth), in
// order. A reset is not a power-off: WasOffDuring never counts it.
func (p *Power) Resets() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.resets...)
}

// Calls returns a copy of every call made so far, in order.
func (p *Power) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Transitions returns a copy of every state change so far, in order,
// after settling what the clock has made due.
func (p *Power) Transitions() []Transition {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return append([]Transition(nil), p.trans...)
}

// Current returns the state the server is in now, honestly (Transitioning
// while a change is under way), without recording a call and without
// faults or lies: what a test sees, not what a controller sees.
func (p *Power) Current() power.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return p.current()
}

// GoingOff reports whether the hardware is bound to go off without a
// further command (ground truth, as a test sees it): a power-off is
// scheduled or under way (a soft shutdown the OS has not finished, a
// power's lag) or the BMC shows Off while the hardware still runs
// (Report.EarlyOff). A power-on meanwhile may still cancel it.
func (p *Power) GoingOff() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return p.pend != nil && p.pend.target == power.StateOff || !p.offAt.IsZero()
}

// Cycles counts completed power-ons that followed a completed power-off
// (off → on, ignoring transitioning in between): the number of power cycles.
func (p *Power) Cycles() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	n, wasOff := 0, p.initial == power.StateOff
	for _, t := range p.trans {
		switch t.To {
		case power.StateOff:
			wasOff = true
		case power.StateOn:
			if wasOff {
				n++
			}
			wasOff = false
		}
	}
	return n
}

func (p *Power) begin(op Op, m power.Mode) Call {
	now := p.now()
	p.settle(now)
	return Call{Seq: len(p.calls) + 1, At: now, Op: op, Mode: m}
}

func (p *Power) end(c Call, err error) (power.State, error) {
	c.Err = err
	if err != nil {
		c.Reported = power.StateUnknown
	}
	p.calls = append(p.calls, c)
	return c.Reported, err
}

// command runs act unless the context is done or a fault says otherwise.
func (p *Power) command(ctx context.Context, c Call, act func() error) (power.State, error) {
	if err := ctx.Err(); err != nil {
		return p.end(c, err)
	}
	f := p.fault(c)
	if f.Kind == FaultNone {
		err := act()
		p.settle(c.At)
		return p.end(c, err)
	}
	switch {
	case f.Applied && f.Late > 0:
		lc := lateCmd{at: c.At.Add(f.Late), op: c.Op, mode: c.Mode}
		i := len(p.late)
		for i > 0 && p.late[i-1].at.After(lc.at) {
			i--
		}
		p.late = append(p.late[:i], append([]lateCmd{lc}, p.late[i:]...)...)
	case f.Applied:
		_ = act()
		p.settle(c.At)
	}
	return p.end(c, p.faultErr(c, f))
}

func (p *Power) fault(c Call) Fault {
	if q := p.queue[c.Op]; len(q) > 0 {
		p.queue[c.Op] = q[1:]
		return q[0]
	}
	if p.cfg.Faults != nil {
		return p.cfg.Faults(c)
	}
	return Fault{}
}

func (p *Power) faultErr(c Call, f Fault) error {
	op := c.Op.String()
	if c.Op == OpOff {
		op = power.OpName(c.Mode)
	}
	switch f.Kind {
	case FaultUnsupported:
		return &power.Error{Op: op, Class: power.ClassUnsupported, Status: 501, Message: "fake: injected unsupported"}
	case FaultBusy:
		return &power.Error{Op: op, Class: power.ClassBusy, Status: 409, Message: "fake: injected busy"}
	case FaultTimeout:
		return fmt.Errorf("fake power %s: %w", op, context.DeadlineExceeded)
	default:
		return &power.Error{Op: op, Class: power.ClassFailed, Status: 500, Message: "fake: injected failure"}
	}
}

// schedule replaces any scheduled change with one to target whose power
// starts to change at start.
func (p *Power) schedule(target power.State, start time.Time, soft bool) {
	if p.pend != nil && p.pend.target == power.StateOn && !p.now().Before(p.pend.start) {
		// A power-on that has started and is now abandoned left the
		// hardware running (the ground truth says so): it counts as on.
		p.settled = power.StateOn
	}
	wasShown := p.pend != nil && p.pend.shown
	p.pend = &pending{target: target, start: start, at: start.Add(p.cfg.Lag), soft: soft}
	switch {
	case wasShown && !start.After(p.now()):
		p.pend.shown = true // still transitioning; nothing new to record
	case wasShown:
		p.record(p.now(), p.settled) // the change under way was abandoned
	}
}

// settle applies what has become due by now.
func (p *Power) settle(now time.Time) {
	// The late commands due by now first, each at its own instant.
	for len(p.late) > 0 && !now.Before(p.late[0].at) {
		lc := p.late[0]
		p.late = p.late[1:]
		p.settleTo(lc.at)
		_ = p.act(Call{At: lc.at, Op: lc.op, Mode: lc.mode})
		p.settleTo(lc.at)
	}
	p.settleTo(now)
}

func (p *Power) settleTo(now time.Time) {
	if !p.offAt.IsZero() && !now.Before(p.offAt) {
		p.completeOff(now)
	}
	pd := p.pend
	if pd == nil {
		return
	}
	if !pd.shown && pd.at.After(pd.start) && !now.Before(pd.start) {
		pd.shown = true
		p.record(pd.start, power.StateTransitioning)
	}
	if pd.target == power.StateOn && !now.Before(pd.start) {
		p.completeOff(pd.start)
		p.setTruth(pd.start, true, CauseCommand) // running from the start of power-on
	}
	if !now.Before(pd.at) {
		p.pend = nil
		p.settled = pd.target
		p.record(pd.at, pd.target)
		if pd.target == power.StateOff {
			if early := p.cfg.Report.EarlyOff; early > 0 && p.on {
				// The BMC shows Off; the hardware runs on a while.
				p.offAt = pd.at.Add(early)
				if !now.Before(p.offAt) {
					p.completeOff(now)
				}
			} else {
				p.setTruth(pd.at, false, CauseCommand) // off once the power-off is complete
			}
		}
	}
}

func (p *Power) setTruth(at time.Time, on bool, cause Cause) {
	if on == p.on {
		return
	}
	p.on = on
	p.truth = append(p.truth, TruthChange{At: at, On: on, Cause: cause})
}

// Truth returns the ground truth: every change of the hardware's real
// power so far, in order (after settling what the clock has made due).
func (p *Power) Truth() []TruthChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return append([]TruthChange(nil), p.truth...)
}

// onAt reports whether the hardware ran at t (ground truth). Changes at t
// count: a power-on starting at t runs at t; a power-off completing at t
// is off at t.
func (p *Power) onAt(t time.Time) bool {
	for i := len(p.truth) - 1; i >= 0; i-- {
		if !p.truth[i].At.After(t) {
			return p.truth[i].On
		}
	}
	return p.initial == power.StateOn
}

// WasOnAt reports whether the hardware was running at instant t (ground
// truth, on the time line of the Power's clock). t must not be later than
// the clock's time.
func (p *Power) WasOnAt(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	return p.onAt(t)
}

// WasOffDuring reports whether the hardware was off at some instant of
// [a, b] (ground truth): the fencing question "have all processes that ran
// at a stopped by b?".
func (p *Power) WasOffDuring(a, b time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	if b.Before(a) {
		return false
	}
	if !p.onAt(a) {
		return true
	}
	for _, tc := range p.truth {
		if !tc.On && tc.At.After(a) && !tc.At.After(b) {
			return true
		}
	}
	return false
}

// OffThroughout reports whether the hardware was off at every instant of
// [a, b] (ground truth).
func (p *Power) OffThroughout(a, b time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle(p.now())
	if b.Before(a) || p.onAt(a) {
		return false
	}
	for _, tc := range p.truth {
		if tc.On && tc.At.After(a) && !tc.At.After(b) {
			return false
		}
	}
	return true
}

// OutOfBandEvents returns the instants of out-of-band power changes.
func (p *Power) OutOfBandEvents() []TruthChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []TruthChange
	for _, tc := range p.truth {
		if tc.Cause == CauseOutOfBand {
			out = append(out, tc)
		}
	}
	return out
}

func (p *Power) current() power.State {
	if p.pend != nil && p.pend.shown {
		return power.StateTransitioning
	}
	return p.settled
}

func (p *Power) record(at time.Time, s power.State) {
	if s == p.shown {
		return
	}
	p.trans = append(p.trans, Transition{At: at, From: p.shown, To: s})
	p.shown = s
}
