package racecheck

import "testing"

type handle struct{ n int }

func TestSame(t *testing.T) {
	p, q := &handle{1}, &handle{1}
	cases := []struct {
		a, b any
		want bool
	}{
		{p, p, true},
		{p, q, false},
		{handle{1}, handle{1}, false}, // values: a second open each call, maybe
		{map[int]int{}, map[int]int{}, false},
		{nil, p, false},
		{p, nil, false},
	}
	for i, c := range cases {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("case %d: Same(%v, %v) = %v, want %v", i, c.a, c.b, got, c.want)
		}
	}
}
