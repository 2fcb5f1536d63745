// Package rebootcheck is the ground-truth oracle the reboot state-machine
// tests share: the reboot package's (on the fake store) and the kube
// module's (on a real API server). It is test support, not API.
package rebootcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrCrash is what a Probe's power call returns when the test crashed the
// process just before it.
var ErrCrash = errors.New("test: process crashed before the power call")

// Probe wraps the power controller a Reconciler under test uses. It can
// crash the process before a power call (CrashArmed: the call returns
// ErrCrash and Crashed is set, so the test restarts the Reconciler), runs
// OnRead once while the power is read (a second writer between the
// Reconciler's read of the host and its write), and calls OnOn at the
// instant of every power-on, before it is sent (the test checks there what
// the store holds and LastRead), and OnOff and AfterOff around every
// power-off. It forwards reboot.Toggler.
type Probe struct {
	power.Controller
	CrashArmed bool
	Crashed    bool
	// LastRead is the last state read (StateUnknown after an error).
	LastRead power.State
	OnRead   func()
	OnOn     func()
	// OnOff and AfterOff, if set, are called right before and right
	// after every power-off is sent (the test compares the hardware's
	// ground truth across the call: a press of the power button may power
	// a host on).
	OnOff, AfterOff func(m power.Mode)
}

// State implements power.Controller.
func (p *Probe) State(ctx context.Context) (power.State, error) {
	if f := p.OnRead; f != nil {
		p.OnRead = nil
		f()
	}
	s, err := p.Controller.State(ctx)
	p.LastRead = s
	if err != nil {
		p.LastRead = power.StateUnknown
	}
	return s, err
}

// On implements power.Controller.
func (p *Probe) On(ctx context.Context) error {
	if p.CrashArmed {
		p.CrashArmed, p.Crashed = false, true
		return ErrCrash
	}
	if p.OnOn != nil {
		p.OnOn()
	}
	return p.Controller.On(ctx)
}

// Off implements power.Controller.
func (p *Probe) Off(ctx context.Context, m power.Mode) error {
	if p.CrashArmed {
		p.CrashArmed, p.Crashed = false, true
		return ErrCrash
	}
	if p.OnOff != nil {
		p.OnOff(m)
	}
	err := p.Controller.Off(ctx, m)
	if p.AfterOff != nil {
		p.AfterOff(m)
	}
	return err
}

// TogglesOff implements reboot.Toggler for the wrapped controller: false
// unless it implements it.
func (p *Probe) TogglesOff(m power.Mode) bool {
	t, ok := p.Controller.(reboot.Toggler)
	return ok && t.TogglesOff(m)
}

// TogglesOn implements reboot.OnToggler for the wrapped controller: false
// unless it implements it.
func (p *Probe) TogglesOn() bool {
	t, ok := p.Controller.(reboot.OnToggler)
	return ok && t.TogglesOn()
}

// Ticket is a fencing client's request as the test knows it: the
// protocol's ticket and the real instant its T was taken.
type Ticket struct {
	reboot.Ticket
	Real time.Time
}

// Cycles counts, in the hardware's ground truth, the power cycles made by
// a command (an off followed by a power-on by command) and the power-offs
// made out of band.
func Cycles(p *fake.Power) (cycles, outOfBandOffs int) {
	wasOff := false
	for _, tc := range p.Truth() {
		switch {
		case !tc.On:
			wasOff = true
			if tc.Cause == fake.CauseOutOfBand {
				outOfBandOffs++
			}
		case wasOff && tc.Cause == fake.CauseCommand:
			cycles++
			wasOff = false
		default:
			wasOff = false
		}
	}
	return cycles, outOfBandOffs
}

// CycledSince reports whether changes (ground truth, in order: a tail of
// fake.Power.Truth) hold a power-off followed by a power-on, the hardware
// running (on) or not before the first of them: the hardware went off
// and back on, whatever the causes, and whatever it did after.
func CycledSince(changes []fake.TruthChange, on bool) bool {
	off := !on
	for _, tc := range changes {
		if !tc.On {
			off = true
		} else if off {
			return true
		}
	}
	return false
}

// CheckCycles returns an error if the hardware was power-cycled by command
// more often than reboots were decided (episodes) plus power-offs out of
// band.
func CheckCycles(p *fake.Power, episodes int) error {
	if cycles, oob := Cycles(p); cycles > episodes+oob {
		return fmt.Errorf("%d power cycles by command for %d reboots and %d out-of-band power-offs", cycles, episodes, oob)
	}
	return nil
}

// HasValidReboot reports whether a valid reboot annotation is present.
func HasValidReboot(h reboot.Host) bool {
	for k := range h.Annotations {
		if reboot.IsRebootAnnotation(k) && reboot.Validate(k, "") == nil {
			return true
		}
	}
	return false
}

// HeldBy returns a valid keyed reboot annotation of h, or "" if none.
func HeldBy(h reboot.Host) string {
	for k := range h.Annotations {
		if k != reboot.Annotation && reboot.IsRebootAnnotation(k) && reboot.Validate(k, "") == nil {
			return k
		}
	}
	return ""
}

// DescribeTruth renders the hardware's ground truth for failure messages.
func DescribeTruth(p *fake.Power) string {
	var b strings.Builder
	for _, tc := range p.Truth() {
		fmt.Fprintf(&b, "%s on=%v %s; ", tc.At.Format("15:04:05.000"), tc.On, tc.Cause)
	}
	return b.String()
}
