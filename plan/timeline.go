package plan

import "time"

// Phases are when one reboot's job reached each phase of a reboot, as the
// fleet saw them; nil when unknown. They feed reports (a bar per server
// per phase: drain from Reboot.StartedAt to Drained, power off to Off,
// held off to On, boot to Healthy, services to Reboot.OperationalAt) and
// no decision reads them.
type Phases struct {
	// Drained: the drain command succeeded (or there was none).
	Drained *time.Time `json:"drained,omitempty"`
	// Off: the server was seen powered off (fenced on evidence).
	Off *time.Time `json:"off,omitempty"`
	// On: the server was powered on again.
	On *time.Time `json:"on,omitempty"`
	// Healthy: its health check passed after the power-on.
	Healthy *time.Time `json:"healthy,omitempty"`
}

// merge returns cur with the phases of obs it does not have yet; cur
// itself when nothing is new (nil stays nil).
func (cur *Phases) merge(obs Phases) *Phases {
	var base Phases
	if cur != nil {
		base = *cur
	}
	changed := false
	for _, f := range []struct{ dst, src **time.Time }{{&base.Drained, &obs.Drained}, {&base.Off, &obs.Off}, {&base.On, &obs.On}, {&base.Healthy, &obs.Healthy}} {
		if *f.dst == nil && *f.src != nil {
			v := **f.src
			*f.dst, changed = &v, true
		}
	}
	if !changed {
		return cur
	}
	return &base
}

func samePhases(a, b *Phases) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := func(x, y *time.Time) bool { return x == y || x != nil && y != nil && *x == *y }
	return same(a.Drained, b.Drained) && same(a.Off, b.Off) && same(a.On, b.On) && same(a.Healthy, b.Healthy)
}

// Mark is an operator's command on a plan and when it was given.
type Mark struct {
	At      time.Time `json:"at"`
	Command string    `json:"command"`
}

// MaxCommands bounds Plan.Commands.
const MaxCommands = 100

// Record returns f applied to the plan, with the command recorded in
// Commands (at most MaxCommands, the oldest dropped) when f succeeds; use
// it with Command: Command(ctx, s, uuid, Record("stop", at, Stop)).
func Record(command string, at time.Time, f func(Plan) (Plan, error)) func(Plan) (Plan, error) {
	return func(p Plan) (Plan, error) {
		q, err := f(p)
		if err != nil {
			return q, err
		}
		cmds := append(append([]Mark(nil), q.Commands...), Mark{At: at, Command: command})
		q.Commands = cmds[max(len(cmds)-MaxCommands, 0):]
		return q, nil
	}
}
