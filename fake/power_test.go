package fake_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/plan"

	"github.com/google/go-cmp/cmp"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var ctx = context.Background()

func TestPowerLagAndSoftDelay(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{Lag: 5 * time.Second, SoftDelay: 30 * time.Second})

	require.NoError(t, p.Off(ctx, power.ModeSoft))
	steps := []struct {
		advance time.Duration
		want    power.State
	}{
		{0, power.StateOn},
		{29 * time.Second, power.StateOn},
		{time.Second, power.StateTransitioning},
		{4 * time.Second, power.StateTransitioning},
		{time.Second, power.StateOff},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		got, err := p.State(ctx)
		require.NoError(t, err)
		assert.Equal(t, s.want, got, "step %d", i)
	}
	require.NoError(t, p.On(ctx))
	got, _ := p.State(ctx)
	assert.Equal(t, power.StateTransitioning, got)
	clk.Advance(5 * time.Second)
	got, _ = p.State(ctx)
	assert.Equal(t, power.StateOn, got)
	assert.Equal(t, 1, p.Cycles())
}

func TestPowerHardEscalatesSoft(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{SoftDelay: time.Hour})
	require.NoError(t, p.Off(ctx, power.ModeSoft))
	clk.Advance(time.Minute)
	assert.Equal(t, power.StateOn, p.Current())
	require.NoError(t, p.Off(ctx, power.ModeHard))
	assert.Equal(t, power.StateOff, p.Current())
}

func TestPowerIgnoreSoftAndUnsupported(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{IgnoreSoft: true})
	require.NoError(t, p.Off(ctx, power.ModeSoft))
	clk.Advance(24 * time.Hour)
	assert.Equal(t, power.StateOn, p.Current())

	p.SetConfig(fake.PowerConfig{SoftUnsupported: true})
	err := p.Off(ctx, power.ModeSoft)
	assert.ErrorIs(t, err, power.ErrUnsupported)
	assert.Equal(t, power.ClassUnsupported, power.Classify(err))
}

func TestPowerIdempotent(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{Initial: power.StateOff})
	require.NoError(t, p.Off(ctx, power.ModeHard))
	require.NoError(t, p.Off(ctx, power.ModeSoft))
	assert.Empty(t, p.Transitions())
	require.NoError(t, p.On(ctx))
	require.NoError(t, p.On(ctx))
	want := []fake.Transition{{At: fake.Epoch, From: power.StateOff, To: power.StateOn}}
	if d := cmp.Diff(want, p.Transitions()); d != "" {
		t.Fatalf("transitions (-want +got):\n%s", d)
	}
	assert.Equal(t, 1, p.Cycles())
}

func TestPowerFaults(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{})
	p.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	p.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true})
	p.FailNext(fake.OpState, fake.Fault{Kind: fake.FaultFailed})

	err := p.Off(ctx, power.ModeHard)
	assert.ErrorIs(t, err, power.ErrBusy)
	assert.Equal(t, power.StateOn, p.Current(), "a fault that is not applied changes nothing")

	err = p.Off(ctx, power.ModeHard)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, power.ClassBusy, power.Classify(err))
	assert.Equal(t, power.StateOff, p.Current(), "an applied fault takes effect")

	s, err := p.State(ctx)
	assert.ErrorIs(t, err, power.ErrFailed)
	assert.Equal(t, power.StateUnknown, s)

	var pe *power.Error
	require.True(t, errors.As(p.Calls()[2].Err, &pe))
	assert.Equal(t, "state", pe.Op)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, p.On(cctx), context.Canceled)
	assert.Equal(t, power.StateOff, p.Current())
	assert.Len(t, p.Calls(), 4)
}

// TestPowerProperties drives a Power with random commands, faults, clock
// jumps (also backwards) and forced state changes, and checks after every
// step that:
//   - the state a State call reports is the state of the recorded timeline
//     at that moment, i.e. a state the controller has actually been in;
//   - the timeline is a chain of real changes;
//   - the call history records every call, in order, with its result;
//   - a fault that is not applied changes nothing;
//   - once the clock has moved past lag and soft delay, the server is in
//     the state the last effective command asked for.
func TestPowerProperties(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		clk := fake.NewClock(time.Time{})
		cfg := fake.PowerConfig{
			Initial:    rapid.SampledFrom([]power.State{power.StateOn, power.StateOff}).Draw(t, "initial"),
			Lag:        time.Duration(rapid.IntRange(0, 10).Draw(t, "lag")) * time.Second,
			SoftDelay:  time.Duration(rapid.IntRange(0, 60).Draw(t, "softDelay")) * time.Second,
			IgnoreSoft: rapid.Bool().Draw(t, "ignoreSoft"),
		}
		p := fake.NewPower(clk.Now, cfg)

		type made struct {
			op   fake.Op
			mode power.Mode
			err  error
		}
		var calls []made
		// want is the state the server must reach once due: nil while an
		// ignored soft off or nothing was asked.
		want := cfg.Initial
		var faultKinds = []fake.FaultKind{fake.FaultNone, fake.FaultUnsupported, fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout}

		high := clk.Now() // the latest time the clock has shown
		stateAt := func() power.State {
			tr := p.Transitions()
			if len(tr) == 0 {
				return cfg.Initial
			}
			return tr[len(tr)-1].To
		}

		t.Repeat(map[string]func(*rapid.T){
			"state": func(t *rapid.T) {
				s, err := p.State(ctx)
				calls = append(calls, made{op: fake.OpState, err: err})
				if err == nil && s != stateAt() {
					t.Fatalf("State reported %v, the controller is in %v", s, stateAt())
				}
			},
			"on": func(t *rapid.T) {
				err := p.On(ctx)
				calls = append(calls, made{op: fake.OpOn, err: err})
				if err == nil {
					want = power.StateOn
				}
			},
			"off": func(t *rapid.T) {
				m := rapid.SampledFrom([]power.Mode{power.ModeSoft, power.ModeHard}).Draw(t, "mode")
				err := p.Off(ctx, m)
				calls = append(calls, made{op: fake.OpOff, mode: m, err: err})
				if err == nil && (m == power.ModeHard || !cfg.IgnoreSoft) {
					want = power.StateOff
				}
			},
			"fault": func(t *rapid.T) {
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "op")
				k := rapid.SampledFrom(faultKinds[1:]).Draw(t, "kind")
				mode := rapid.SampledFrom([]power.Mode{power.ModeSoft, power.ModeHard}).Draw(t, "mode")
				p.FailNext(op, fake.Fault{Kind: k})
				before := p.Transitions()
				beforeState := p.Current()
				var err error
				switch op {
				case fake.OpState:
					var s power.State
					s, err = p.State(ctx)
					if s != power.StateUnknown {
						t.Fatalf("faulted State reported %v", s)
					}
				case fake.OpOn:
					err = p.On(ctx)
				case fake.OpOff:
					err = p.Off(ctx, mode)
				}
				calls = append(calls, made{op: op, mode: mode, err: err})
				if err == nil {
					t.Fatalf("injected %v fault returned no error", k)
				}
				if got := p.Transitions(); len(got) != len(before) || p.Current() != beforeState {
					t.Fatalf("a fault that was not applied changed the state")
				}
			},
			"advance": func(t *rapid.T) {
				now := clk.Advance(time.Duration(rapid.IntRange(0, 120).Draw(t, "seconds")) * time.Second)
				if now.After(high) {
					high = now
				}
			},
			"jumpBack": func(t *rapid.T) {
				clk.Advance(-time.Duration(rapid.IntRange(1, 120).Draw(t, "seconds")) * time.Second)
			},
			"settle": func(t *rapid.T) {
				if clk.Now().Before(high) {
					clk.Set(high)
				}
				high = clk.Advance(cfg.Lag + cfg.SoftDelay)
				if got := p.Current(); got != want {
					t.Fatalf("after lag and soft delay the server is %v, want %v", got, want)
				}
			},
			"force": func(t *rapid.T) {
				s := rapid.SampledFrom([]power.State{power.StateOn, power.StateOff}).Draw(t, "state")
				p.ForceState(s)
				want = s
			},
			"": func(t *rapid.T) {
				tr := p.Transitions()
				prev := cfg.Initial
				for i, x := range tr {
					if x.From != prev || x.From == x.To {
						t.Fatalf("transition %d %v->%v does not follow %v", i, x.From, x.To, prev)
					}
					prev = x.To
				}
				if got := p.Current(); got != prev {
					t.Fatalf("current %v, timeline ends at %v", got, prev)
				}
				got := p.Calls()
				if len(got) != len(calls) {
					t.Fatalf("history has %d calls, %d were made", len(got), len(calls))
				}
				for i, c := range got {
					m := calls[i]
					if c.Seq != i+1 || c.Op != m.op || (c.Op == fake.OpOff && c.Mode != m.mode) || c.Err != m.err {
						t.Fatalf("call %d recorded as %+v, made %+v", i+1, c, m)
					}
				}
			},
		})
	})
}

func TestPowerConcurrent(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Now, fake.PowerConfig{Lag: time.Second})
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func(i int) {
			defer func() { done <- struct{}{} }()
			for j := 0; j < 200; j++ {
				switch (i + j) % 3 {
				case 0:
					_, _ = p.State(ctx)
				case 1:
					_ = p.Off(ctx, power.ModeHard)
				default:
					_ = p.On(ctx)
				}
				clk.Advance(time.Second)
			}
		}(i)
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	assert.Len(t, p.Calls(), 800)
}

// BenchmarkFleetObserve measures one Observe on fleets of 1,000 and 10,000
// servers with a job each (it was O(servers × jobs): 2.2 s a pass at
// 10,000).
func BenchmarkFleetObserve(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			clk := fake.NewClock(time.Time{})
			var fs []fake.FleetServer
			for i := 0; i < n; i++ {
				fs = append(fs, fake.FleetServer{UUID: fmt.Sprintf("u%05d", i), Hostname: fmt.Sprintf("cn%05d", i),
					Drain: time.Minute, Boot: time.Minute})
			}
			f := fake.NewFleet(clk.Now, "", fs...)
			for i := 0; i < n; i++ {
				_ = f.CreateJob(context.Background(), plan.Action{Kind: plan.ActionCreateJob, Server: fs[i].UUID, JobUUID: fmt.Sprintf("j%05d", i)})
			}
			clk.Advance(90 * time.Second)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Observe(context.Background(), plan.Plan{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A press toggles the hardware: on if it is off, an OS shutdown of
// SoftDelay if it runs, lost in a change under way (issue 36).
func TestPowerButtonToggles(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second})
	require.True(t, p.TogglesOff(power.ModeSoft))
	require.False(t, p.TogglesOff(power.ModeHard))
	require.NoError(t, p.Off(ctx, power.ModeSoft)) // press: the OS shuts down
	clk.Advance(10 * time.Second)
	require.NoError(t, p.Off(ctx, power.ModeSoft)) // lost in the shutdown
	require.True(t, p.HardwareOn())
	clk.Advance(40 * time.Second)
	require.False(t, p.HardwareOn(), "off 45 s after the first press")
	require.NoError(t, p.Off(ctx, power.ModeSoft)) // press on a host that is off
	require.True(t, p.HardwareOn(), "a press powers an off host on")
	require.NoError(t, p.Off(ctx, power.ModeHard)) // ForceOff sets the power
	require.False(t, p.HardwareOn())

	all := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, Initial: power.StateOff})
	require.NoError(t, all.On(ctx))
	require.True(t, all.HardwareOn())
	require.NoError(t, all.On(ctx)) // a press while on: shutdown (SoftDelay 0)
	require.False(t, all.HardwareOn())
	require.False(t, fake.NewPower(clk.Real, fake.PowerConfig{}).TogglesOff(power.ModeSoft), "no button by default")
}

// TestPowerReset: a reset keeps the hardware on (never off in the ground
// truth), is recorded in Resets, and is refused with no effect while the
// hardware is off or changing.
func TestPowerReset(t *testing.T) {
	clk := fake.NewClock(time.Unix(1000, 0))
	p := fake.NewPower(clk.Real, fake.PowerConfig{Lag: time.Second})
	ctx := context.Background()
	start := clk.Real()
	require.NoError(t, p.Reset(ctx))
	assert.Equal(t, []time.Time{start}, p.Resets())
	clk.Advance(time.Second)
	assert.False(t, p.WasOffDuring(start, clk.Real()), "a reset is not a power-off")
	require.NoError(t, p.Off(ctx, power.ModeHard))
	require.ErrorIs(t, p.Reset(ctx), power.ErrFailed, "changing: not reset")
	clk.Advance(2 * time.Second)
	require.ErrorIs(t, p.Reset(ctx), power.ErrFailed, "off: not reset")
	assert.False(t, p.HardwareOn(), "a refused reset powers nothing on")
	assert.Len(t, p.Resets(), 1)
	assert.Equal(t, fake.OpReset, p.Calls()[len(p.Calls())-1].Op)
}

// TestFaultLateAppliesAfterTheCall: a Fault with Applied and Late carries
// the command out Late after the call (a lost answer's late landing, A5),
// in the ground truth too; calls and reads before then see the old state.
func TestFaultLateAppliesAfterTheCall(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll})
	p.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 20 * time.Second})
	at := clk.Real()
	require.ErrorIs(t, p.Off(ctx, power.ModeHard), context.DeadlineExceeded)
	clk.Advance(19 * time.Second)
	assert.True(t, p.HardwareOn(), "not carried out before Late")
	assert.False(t, p.WasOffDuring(at, clk.Real()))
	clk.Advance(2 * time.Second)
	assert.False(t, p.HardwareOn(), "the press landed Late after the call")
	tr := p.Truth()
	require.NotEmpty(t, tr)
	assert.Equal(t, at.Add(20*time.Second), tr[len(tr)-1].At, "dated at its landing")
	// A press (ButtonAll) sent after it toggles the host back on.
	require.NoError(t, p.On(ctx))
	assert.True(t, p.HardwareOn())
}
