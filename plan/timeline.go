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

// Replay says how far a tool that replays numbered commands recorded
// elsewhere (rebootctl's side file: Source its ID, each command
// numbered one more than the one before) applied them to a plan: the
// command numbered Seq was applied, and so was every earlier one of
// Source (commands are replayed in their order). Unlike the commands'
// times, the numbers do not depend on any clock.
type Replay struct {
	Source string `json:"source"`
	Seq    int64  `json:"seq"`
}

// MaxReplays bounds Plan.Replays: the sources applied most recently are
// kept.
const MaxReplays = 16

// RecordReplay is Record for the command numbered seq of source: when f
// succeeds it also records in Replays that source's commands are applied
// up to seq.
func RecordReplay(command string, at time.Time, source string, seq int64, f func(Plan) (Plan, error)) func(Plan) (Plan, error) {
	rec := Record(command, at, f)
	return func(p Plan) (Plan, error) {
		q, err := rec(p)
		if err != nil {
			return q, err
		}
		rs := make([]Replay, 0, len(q.Replays)+1)
		for _, r := range q.Replays {
			if r.Source == source {
				seq = max(seq, r.Seq)
				continue
			}
			rs = append(rs, r)
		}
		rs = append(rs, Replay{Source: source, Seq: seq})
		q.Replays = rs[max(len(rs)-MaxReplays, 0):]
		return q, nil
	}
}

// Replayed returns the highest number of source's commands applied to p
// (RecordReplay), false when p keeps none of source.
func (p Plan) Replayed(source string) (int64, bool) {
	for _, r := range p.Replays {
		if r.Source == source {
			return r.Seq, true
		}
	}
	return 0, false
}
