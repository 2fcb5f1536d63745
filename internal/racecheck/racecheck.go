// Package racecheck races writers against a store for the conformance
// kits (plantest, reboottest, remediationtest): a compare-and-swap whose
// check is not atomic with its write (a read, a check in Go, then a write
// without the version in its condition) passes every check made one call
// at a time, and only writers at once tell it from a correct one.
package racecheck

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Writers is how many writers race in each round, Readers how many
// readers read beside them. A kit runs at least Rounds rounds, and goes
// on until MinTime has passed since its first round or it has run
// MaxRounds (see Enough).
const (
	Writers   = 12
	Readers   = 4
	Rounds    = 10
	MaxRounds = 400
	MinTime   = 400 * time.Millisecond
)

// Enough reports whether a kit that began its first round at began and
// has run rounds rounds may stop. A store of one process whose check is
// not atomic with its write loses in a round only when the scheduler puts
// another writer between its check and its write: a fifth of rounds or
// fewer on two cores under the race detector, so ten rounds miss it about
// once in ten runs. Fast stores therefore run for MinTime (a few hundred
// rounds: a miss in fewer than one run in a million), and a slow store,
// over the network, whose check and write are a round trip apart, at
// least Rounds.
func Enough(rounds int, began time.Time) bool { return EnoughTimes(1, rounds, began) }

// EnoughTimes is Enough for a check whose losing interleaving is rarer:
// it runs n times as long and as many rounds at most. Under the race
// detector (go test -race), whose rounds are several times slower, every
// kit runs three times as long again.
//
// Detection stays a matter of chance: a store whose check reads outside
// its transaction loses only when the scheduler interleaves, and one run
// of a kit can miss it. Measured on a loaded 2-core machine for the
// rarest case (plantest's Put that newly holds a server beside Creates
// over it, n = 4, a store whose Put lists plans before its lock): caught
// in 30 of 30 runs without -race; under -race, in 11 of 15 runs before
// the race factor and in 30 of 30 with it. Run a kit with -count to make
// a miss rarer still.
func EnoughTimes(n, rounds int, began time.Time) bool {
	n *= raceFactor
	return rounds >= n*MaxRounds || rounds >= Rounds && time.Since(began) >= time.Duration(n)*MinTime
}

// WarmUp is how long readers read before the writers are released: a Go
// mutex waited on for over a millisecond turns fair (it is handed from
// one waiter to the next), which is what puts other writers' checks
// between a writer's check and its write in a store of one process.
const WarmUp = 2 * time.Millisecond

// Race runs write(0) … write(n-1) in n goroutines released together by a
// start barrier, and returns each one's error once all have returned.
// Beside them, Readers goroutines call read (if not nil) over and over,
// from WarmUp before the writers start until they are done, as other
// processes read the record: writers alone on a store of one process
// finish each call before the next one takes the lock (a Go mutex lets
// the goroutine that just unlocked take it again), so a check not atomic
// with its write is almost never caught; readers keep the store's lock
// contended, which hands it from one waiter to the next and puts other
// writers' checks between a writer's check and its write (a store of one
// process that loses the compare-and-swap is caught in some rounds: see
// Enough).
func Race(n int, write func(i int) error, read func()) []error {
	errs := make([]error, n)
	var ready, done, readers, reading sync.WaitGroup
	start := make(chan struct{})
	var stop atomic.Bool
	if read != nil {
		reading.Add(Readers)
		for r := 0; r < Readers; r++ {
			readers.Add(1)
			go func() {
				defer readers.Done()
				read()
				reading.Done()
				for !stop.Load() {
					read()
				}
			}()
		}
	}
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			errs[i] = write(i)
		}()
	}
	ready.Wait()
	if read != nil {
		time.Sleep(WarmUp)
		reading.Wait()
	}
	close(start)
	done.Wait()
	stop.Store(true)
	readers.Wait()
	return errs
}

// OneWinner checks the errors of one round in which every writer wrote
// from the same read: exactly one may succeed, and every other must fail
// with an error wrapping conflict. It returns the winner's index, or an
// error saying what went wrong (what names the writes, conflict's name
// the error expected).
func OneWinner(errs []error, conflict error, what string) (int, error) {
	winner, won := -1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if winner < 0 {
				winner = i
			}
		case !errors.Is(err, conflict):
			return -1, fmt.Errorf("%d %s at once from one read: writer %d failed with %v, want an error wrapping %v", len(errs), what, i, err, conflict)
		}
	}
	if won != 1 {
		return -1, fmt.Errorf("%d %s at once from one read: %d succeeded, want exactly one (the others refused with %v): the store's check is not atomic with its write", len(errs), what, won, conflict)
	}
	return winner, nil
}
