package rebootcheck

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
)

func TestCycledSince(t *testing.T) {
	at := time.Unix(0, 0)
	ch := func(on bool) fake.TruthChange { return fake.TruthChange{At: at, On: on} }
	for _, c := range []struct {
		name    string
		changes []fake.TruthChange
		on      bool
		want    bool
	}{
		{"nothing", nil, true, false},
		{"off only", []fake.TruthChange{ch(false)}, true, false},
		{"off then on", []fake.TruthChange{ch(false), ch(true)}, true, true},
		{"off then on then off (seed 202)", []fake.TruthChange{ch(false), ch(true), ch(false)}, true, true},
		{"was off, on", []fake.TruthChange{ch(true)}, false, true},
		{"was on, nothing off", []fake.TruthChange{}, true, false},
	} {
		if got := CycledSince(c.changes, c.on); got != c.want {
			t.Errorf("%s: CycledSince = %v, want %v", c.name, got, c.want)
		}
	}
}
