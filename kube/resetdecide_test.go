package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// TestDecideReset: the reset path's rules, one case each.
func TestDecideReset(t *testing.T) {
	c := resetConfig{StaleReads: 30 * time.Second, PollInterval: 5 * time.Second, QuickPoll: time.Second, RetryDelay: 10 * time.Second}
	t0 := time.Unix(1_000_000, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	for _, tc := range []struct {
		name string
		o    resetObserved
		now  time.Time
		want resetDecision
	}{
		{"no request, nothing kept", resetObserved{}, sec(0), resetDecision{}},
		{"request gone: cleared", resetObserved{Rec: resetRecord{Since: sec(0)}}, sec(5), resetDecision{Clear: true}},
		{"new request: persisted first", resetObserved{Requested: true, Power: power.StateOn}, sec(0),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0)}}},
		{"new request: its identity persisted", resetObserved{Requested: true, Request: &resetRequest{Value: "x"}, Power: power.StateOn}, sec(0),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Request: &resetRequest{Value: "x"}}}},
		{"found done before a stop: done again, nothing sent", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(1),
			Op: "reset", Resets: 1, Done: sec(31)}, Power: power.StateOff}, sec(40), resetDecision{Done: true}},
		{"found done (left off) before a stop", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Done: sec(31), LeftOff: true}, Power: power.StateOn},
			sec(40), resetDecision{Done: true, LeftOff: true}},
		{"on: reset, its intent persisted", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0)}, Power: power.StateOn}, sec(1),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Call: "reset"}},
		{"unknown: no reset (it may power on a host that is off)", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0)}, Power: power.StateUnknown}, sec(1),
			resetDecision{After: time.Second}},
		{"off that may echo the past: wait", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0)}, Power: power.StateOff}, sec(10),
			resetDecision{After: 20 * time.Second}},
		{"off StaleReads after the request: power on", resetObserved{Requested: true, Online: true, Rec: resetRecord{Since: sec(0)}, Power: power.StateOff}, sec(30),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(30), Op: "on"}, Call: "on"}},
		{"accepted: persisted", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset"}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2)}}, sec(2),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(2), Op: "reset"}}},
		{"an outcome of an earlier command is not this one's", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(5), Op: "reset"}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2)}}, sec(6), resetDecision{After: 29 * time.Second}},
		{"on too soon after the reset: may echo", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(2), Op: "reset"}, Power: power.StateOn}, sec(20),
			resetDecision{After: 12 * time.Second}},
		{"on StaleReads after the reset: done", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(2), Op: "reset"}, Power: power.StateOn}, sec(32),
			resetDecision{Done: true}},
		{"off StaleReads after the reset: power on", resetObserved{Requested: true, Online: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(2), Op: "reset"}, Power: power.StateOff}, sec(32),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(32), Accepted: sec(2), Op: "on"}, Call: "on"}},
		{"failed: may have been done, not sent again soon", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset"}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassBusy}}}, sec(3), resetDecision{After: 28 * time.Second}},
		{"timed out (busy, no status): may have been done, not sent again soon", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}}}, sec(3), resetDecision{After: 28 * time.Second}},
		{"a gateway's 504: may have been done", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassFailed, Status: 504}}}, sec(3), resetDecision{After: 28 * time.Second}},
		{"refused (409): recorded, does not count", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassBusy, Status: 409}}}, sec(2),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Refused: sec(2)}}},
		{"refused (500): recorded, does not count", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(32), err: &power.Error{Op: "reset", Class: power.ClassFailed, Status: 500}}}, sec(32),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 1, Refused: sec(32)}}},
		{"not sent: recorded, does not count", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: fmt.Errorf("pool: %w", power.ErrNotSent)}}, sec(2),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Refused: sec(2)}}},
		{"refused: not again before RetryDelay", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Refused: sec(2)}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassBusy, Status: 409}}}, sec(5), resetDecision{After: 7 * time.Second}},
		{"refused: again RetryDelay after, on an On reading", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Refused: sec(2)}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassBusy, Status: 409}}}, sec(12),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(12), Op: "reset", Resets: 1, Refused: sec(2)}, Call: "reset"}},
		{"refused after a reset of unknown outcome: the second is still allowed", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 1, Refused: sec(32)}, Power: power.StateOn}, sec(42),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(42), Op: "reset", Resets: 2, Refused: sec(32)}, Call: "reset"}},
		{"refused: no reset on an unknown reading", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Refused: sec(2)}, Power: power.StateUnknown}, sec(12),
			resetDecision{After: time.Second}},
		{"refused reset, then accepted: persisted", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(12), Op: "reset", Resets: 1, Refused: sec(2)}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(13)}}, sec(13),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(12), Accepted: sec(13), Op: "reset", Resets: 1, Refused: sec(2)}}},
		{"unknown outcome (restart): again StaleReads after", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset", Resets: 1}, Power: power.StateOn}, sec(31),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2}, Call: "reset"}},
		{"second reset of unknown outcome: give up, no third", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2}, Power: power.StateOn}, sec(61),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2, GaveUp: sec(61)}, GaveUp: true}},
		{"given up: wait for evidence", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2, GaveUp: sec(61)}, Power: power.StateOn}, sec(90),
			resetDecision{After: 5 * time.Second}},
		{"given up, then off: power on", resetObserved{Requested: true, Online: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2, GaveUp: sec(61)}, Power: power.StateOff}, sec(90),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(90), Op: "on", Resets: 2, GaveUp: sec(61)}, Call: "on"}},
		{"given up, then a late answer: persisted", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Op: "reset", Resets: 2, GaveUp: sec(61)}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(70)}}, sec(90),
			resetDecision{Write: true, Rec: resetRecord{Since: sec(0), Sending: sec(31), Accepted: sec(70), Op: "reset", Resets: 2, GaveUp: sec(61)}}},
		{"power-on of unknown outcome, on StaleReads after: done", resetObserved{Requested: true, Online: true, Rec: resetRecord{Since: sec(0), Sending: sec(30), Op: "on"}, Power: power.StateOn}, sec(60),
			resetDecision{Done: true}},
		{"off StaleReads after the request, spec.online false: done, left off", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0)}, Power: power.StateOff}, sec(30),
			resetDecision{Done: true, LeftOff: true}},
		{"off StaleReads after the reset, held: done, left off", resetObserved{Requested: true, Online: true, Held: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Accepted: sec(2), Op: "reset", Resets: 1}, Power: power.StateOff}, sec(32),
			resetDecision{Done: true, LeftOff: true}},
		{"no request, off, online, no hold: power on", resetObserved{Online: true, Power: power.StateOff}, sec(0),
			resetDecision{Write: true, Rec: resetRecord{Sending: sec(0), Op: "on"}, Call: "on"}},
		{"no request, off soon after a power-on: wait", resetObserved{Online: true, Rec: resetRecord{Sending: sec(0), Op: "on"}, Power: power.StateOff}, sec(10),
			resetDecision{After: 20 * time.Second}},
		{"no request, off, spec.online false: nothing", resetObserved{Power: power.StateOff}, sec(0), resetDecision{}},
		{"no request, off, held: nothing", resetObserved{Online: true, Held: true, Power: power.StateOff}, sec(0), resetDecision{}},
		{"unsupported: reported", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset"}, Power: power.StateOn,
			Outcome: &resetOutcome{at: sec(2), err: &power.Error{Op: "reset", Class: power.ClassUnsupported}}}, sec(2), resetDecision{Unsupported: true, After: time.Minute}},
		{"in flight: wait", resetObserved{Requested: true, Rec: resetRecord{Since: sec(0), Sending: sec(1), Op: "reset"}, InFlight: true}, sec(2), resetDecision{After: 5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decideReset(tc.o, c, tc.now))
		})
	}
}

// TestResetStateMachine: decideReset against a fake host whose BMC lies
// (stale and flapping reads, unknown reads, calls that fail after they
// took effect, out-of-band power-offs and power-ons) and a controller
// that restarts (losing what it kept in memory), checked against the
// hardware's ground truth:
//
//   - the reset path never powers the host off (every power-off of the
//     hardware is out of band);
//   - a request is done only if the hardware was reset or was off at
//     some instant since the request was first seen;
//   - no request is sent more than maxResets resets (ground truth), plus
//     one for each reset a lying BMC refused (an answer with a status,
//     which says it did nothing) and carried out all the same: a refusal
//     does not count, and the reset is sent again;
//   - refusals alone never make the controller give up;
//   - a stop between Done's two writes (the state marked done, the
//     request not yet removed) sends nothing more for the request;
//   - once the BMC's reads are honest and nothing happens out of band,
//     the request is done or given up (ResetOutcomeUnknown) within a
//     bounded time, whether or not the answers to resets keep being lost
//     (a lost-answer fault that stays on, as on NC-SI hardware), and done
//     if no answer was ever lost nor forgotten.
func TestResetStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := resetConfig{StaleReads: 2 * time.Second, PollInterval: 500 * time.Millisecond, QuickPoll: 100 * time.Millisecond, RetryDelay: time.Second}
		clk := fake.NewClock(time.Unix(1_000_000, 0))
		rep := fake.Report{
			Stale:   time.Duration(rapid.IntRange(0, 2000).Draw(t, "staleMs")) * time.Millisecond,
			Flap:    rapid.Bool().Draw(t, "flap"),
			Unknown: rapid.Float64Range(0, 0.3).Draw(t, "unknown"),
			Seed:    rapid.Uint64().Draw(t, "seed"),
		}
		hw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: 100 * time.Millisecond, Report: rep})
		ctx := context.Background()
		var rec resetRecord
		var out *resetOutcome
		requested := true
		lies, unknowns := 0, 0 // resets refused though carried out; resets whose answer timed out
		pass := func() resetDecision {
			s, err := hw.State(ctx)
			if err != nil {
				s = power.StateUnknown
			}
			now := clk.Now()
			d := decideReset(resetObserved{Requested: requested, Online: true, Rec: rec, Power: s, Outcome: out}, cfg, now)
			if d.Done || d.GaveUp {
				n := 0
				for _, r := range hw.Resets() {
					if !r.Before(rec.Since) {
						n++
					}
				}
				if n > maxResets+lies {
					t.Fatalf("%d resets for one request since %v: %v", n, rec.Since, hw.Resets())
				}
			}
			switch {
			case d.Done:
				if !hw.WasOffDuring(rec.Since, clk.Real()) {
					ok := false
					for _, r := range hw.Resets() {
						ok = ok || !r.Before(rec.Since)
					}
					if !ok {
						t.Fatalf("done at %v with no reset and no power-off since %v: truth %v", now, rec.Since, hw.Truth())
					}
				}
				if rec.Done.IsZero() && rapid.Bool().Draw(t, "stopMidDone") {
					// The state written (done), the removal of the request
					// not: a stop between Done's two writes.
					rec.Done, rec.LeftOff, out = now, d.LeftOff, nil
					break
				}
				requested, rec, out = false, resetRecord{}, nil
			case d.Clear:
				rec, out = resetRecord{}, nil
			case d.Write:
				rec = d.Rec
			}
			if d.Call != "" && !rec.Done.IsZero() {
				t.Fatalf("%s sent for a request whose state says done: %+v", d.Call, rec)
			}
			if d.Call != "" {
				var err error
				if d.Call == "on" {
					err = hw.On(ctx)
				} else {
					err = hw.Reset(ctx)
				}
				out = &resetOutcome{at: clk.Now(), err: err}
			}
			return d
		}
		queued, restarts := 0, 0
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0:
				hw.OutOfBandOff()
			case 1:
				hw.OutOfBandOn()
			case 2:
				queued++ // each costs the liveness phase at most one retry
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpReset}).Draw(t, "op")
				f := fake.Fault{Kind: rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}).Draw(t, "kind"),
					Applied: rapid.Bool().Draw(t, "applied")}
				if op == fake.OpReset && f.Kind != fake.FaultTimeout && f.Applied {
					lies++ // a refusal (409, 500) of a reset carried out all the same
				}
				if op == fake.OpReset && f.Kind == fake.FaultTimeout {
					unknowns++
				}
				hw.FailNext(op, f)
			case 3:
				restarts++
				out = nil // a restart: memory lost, the record kept
			case 4:
				if !requested {
					requested = true // a new request
				}
			default:
				pass()
			}
			clk.Advance(time.Duration(rapid.IntRange(0, 1500).Draw(t, "advanceMs")) * time.Millisecond)
		}
		for _, tc := range hw.Truth() {
			if !tc.On && tc.Cause != fake.CauseOutOfBand {
				t.Fatalf("the reset path powered the host off: %v", hw.Truth())
			}
		}
		// Liveness: the BMC's reads are honest from now on; the answers to
		// its resets may stay lost (they are carried out).
		lost := rapid.Bool().Draw(t, "lostAnswers")
		hw.SetReport(fake.Report{})
		if lost {
			hw.SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpReset {
					return fake.Fault{Kind: fake.FaultTimeout, Applied: true}
				}
				return fake.Fault{}
			}})
		}
		if !requested {
			requested = true
		}
		begin := clk.Now()
		for requested && rec.GaveUp.IsZero() {
			if clk.Now().Sub(begin) > time.Duration(queued+maxResets+3)*(cfg.StaleReads+cfg.RetryDelay+cfg.PollInterval) {
				t.Fatalf("neither done nor given up %v after the BMC's reads became honest: record %+v, truth %v", clk.Now().Sub(begin), rec, hw.Truth())
			}
			d := pass()
			step := d.After
			if step <= 0 || step > cfg.PollInterval {
				step = min(max(step, 10*time.Millisecond), cfg.PollInterval)
			}
			clk.Advance(step)
		}
		if requested && !lost && unknowns == 0 && restarts == 0 {
			t.Fatalf("gave up with no answer lost nor forgotten (refusals and failed reads alone): record %+v, calls %v", rec, hw.Calls())
		}
		for _, tc := range hw.Truth() {
			if !tc.On && tc.Cause != fake.CauseOutOfBand {
				t.Fatalf("the reset path powered the host off: %v", hw.Truth())
			}
		}
	})
}
