package power

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want Class
	}{
		{nil, ClassNone},
		{ErrUnsupported, ClassUnsupported},
		{fmt.Errorf("x: %w", ErrBusy), ClassBusy},
		{ErrFailed, ClassFailed},
		{errors.New("other"), ClassFailed},
		{context.DeadlineExceeded, ClassBusy},
		{fmt.Errorf("op: %w", context.Canceled), ClassFailed},
		{&Error{Op: "on", Class: ClassBusy}, ClassBusy},
		{&Error{Op: "on", Class: ClassFailed, Err: context.DeadlineExceeded}, ClassFailed},
		{&Error{Op: "on", Class: ClassUnsupported, Err: errors.New("x")}, ClassUnsupported},
	}
	for i, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("step %d: Classify(%v) = %v, want %v", i, tt.err, got, tt.want)
		}
	}
}

func TestErrorIsAndUnwrap(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	e := &Error{Op: "state", Class: ClassFailed, Status: 0, Err: cause}
	if !errors.Is(e, ErrFailed) || errors.Is(e, ErrBusy) || !errors.Is(e, cause) {
		t.Fatalf("errors.Is mismatch for %v", e)
	}
	if got, want := e.Error(), "power: state: failed: dial tcp: refused"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestParseModeAndStrings(t *testing.T) {
	for _, m := range []Mode{ModeSoft, ModeHard} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("HARD"); !errors.Is(err, ErrUnknownMode) {
		t.Fatalf("ParseMode(HARD) err = %v", err)
	}
	names := map[string]bool{}
	for _, s := range []State{StateUnknown, StateOn, StateOff, StateTransitioning, State(9)} {
		names[s.String()] = true
	}
	for _, c := range []Class{ClassNone, ClassUnsupported, ClassBusy, ClassFailed, Class(9)} {
		names["c"+c.String()] = true
	}
	if len(names) != 10 || Mode(7).String() != "Mode(7)" {
		t.Fatalf("names not distinct: %v", names)
	}
}
