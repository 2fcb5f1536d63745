package racecheck

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

var errConflict = errors.New("conflict")

// A store with an atomic compare-and-swap has one winner a round; one
// whose check is not atomic with its write is caught.
func TestRaceOneWinner(t *testing.T) {
	var mu sync.Mutex
	ver := 0
	atomicPut := func(v int) error {
		mu.Lock()
		defer mu.Unlock()
		if v != ver {
			return errConflict
		}
		ver++
		return nil
	}
	var ready atomic.Int32
	racyPut := func(v int) error {
		mu.Lock()
		ok := v == ver
		mu.Unlock()
		if !ok {
			return errConflict
		}
		ready.Add(1)
		for ready.Load() < 2 { // both checked before either writes
		}
		mu.Lock()
		ver++
		mu.Unlock()
		return nil
	}
	v := ver
	if _, err := OneWinner(Race(Writers, func(int) error { return atomicPut(v) }, func() { mu.Lock(); _ = ver; mu.Unlock() }), errConflict, "puts"); err != nil {
		t.Fatal(err)
	}
	v = ver
	if _, err := OneWinner(Race(2, func(int) error { return racyPut(v) }, nil), errConflict, "puts"); err == nil {
		t.Fatal("two winners passed")
	}
	if _, err := OneWinner([]error{nil, errors.New("boom")}, errConflict, "puts"); err == nil {
		t.Fatal("an error other than the conflict passed")
	}
}
