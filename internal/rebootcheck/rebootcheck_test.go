package rebootcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

func TestCyclesAndProbe(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	p := &Probe{Controller: pw}
	ons := 0
	p.OnOn = func() { ons++ }

	// A crash armed before a power call: nothing reaches the hardware.
	p.CrashArmed = true
	if err := p.Off(ctx, power.ModeHard); !errors.Is(err, ErrCrash) || !p.Crashed {
		t.Fatalf("armed crash: %v, crashed %v", err, p.Crashed)
	}
	if c, o := Cycles(pw); c != 0 || o != 0 {
		t.Fatalf("after a crash: %d cycles, %d out-of-band offs", c, o)
	}
	// A power cycle by command counts once, an out-of-band off apart.
	clk.Advance(time.Second)
	if err := p.Off(ctx, power.ModeHard); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := p.On(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	pw.OutOfBandOff()
	clk.Advance(time.Second)
	pw.OutOfBandOn()
	if c, o := Cycles(pw); c != 1 || o != 1 || ons != 1 {
		t.Fatalf("%d cycles, %d out-of-band offs, %d power-ons seen; want 1, 1, 1 (truth %s)", c, o, ons, DescribeTruth(pw))
	}
	if CheckCycles(pw, 1) != nil || CheckCycles(pw, 0) != nil {
		t.Fatal("one cycle is covered by one reboot or one out-of-band off")
	}
	clk.Advance(time.Second)
	_ = p.Off(ctx, power.ModeHard)
	clk.Advance(time.Second)
	_ = p.On(ctx)
	if err := CheckCycles(pw, 0); err == nil {
		t.Fatalf("two cycles by command for no reboot and one out-of-band off passed (truth %s)", DescribeTruth(pw))
	}
	if s, _ := p.State(ctx); s != power.StateOn || p.LastRead != power.StateOn {
		t.Fatalf("state %v, last read %v", s, p.LastRead)
	}

	h := reboot.Host{Annotations: map[string]string{reboot.Annotation: "", "example.com/x": ""}}
	if !HasValidReboot(h) || HeldBy(h) != "" {
		t.Fatalf("bare annotation: valid %v, held by %q", HasValidReboot(h), HeldBy(h))
	}
	h.Annotations[reboot.AnnotationPrefix+"fencing"] = ""
	if HeldBy(h) != reboot.AnnotationPrefix+"fencing" {
		t.Fatalf("held by %q", HeldBy(h))
	}
}
