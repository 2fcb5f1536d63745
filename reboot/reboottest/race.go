package reboottest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/reboot"
)

// raceAnnotation is the annotation the race check's writers set.
const raceAnnotation = "example.com/race"

// raceCheck calls Update of host name from many writers at once (the
// controller's status write beside a fencing client's keyed request), in
// racecheck.Rounds to racecheck.MaxRounds rounds (racecheck.Enough),
// through both handles, all from one read: exactly one must succeed, the
// others fail with ErrConflict, and the store's record, read back, must
// hold the winner's write under a new version. A store whose version check
// is not atomic with its write passes every check made one call at a time.
func raceCheck(ctx context.Context, t testing.TB, hosts, other reboot.HostStore, name string) {
	t.Helper()
	handles := []reboot.HostStore{hosts, other}
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := hosts.Get(ctx, name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		mark := func(i int) string { return fmt.Sprintf("round-%d-writer-%d", round, i) }
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			w := read
			w.Annotations = maps.Clone(read.Annotations)
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			w.Annotations[raceAnnotation] = mark(i)
			_, err := handles[i%2].Update(ctx, w)
			return err
		}, func() { _, _ = other.Get(ctx, name) })
		winner, err := racecheck.OneWinner(errs, reboot.ErrConflict, "Updates of host "+name)
		if err != nil {
			t.Errorf("%v (a fencing client's keyed request beside the controller's write would be lost)", err)
			return
		}
		got, err := other.Get(ctx, name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Annotations[raceAnnotation] != mark(winner) || got.Version == read.Version {
			t.Errorf("after %d Updates of host %s at once, writer %d alone accepted: the store holds %s=%q, version %q (was %q); want the winner's write and a new version",
				racecheck.Writers, name, winner, raceAnnotation, got.Annotations[raceAnnotation], got.Version, read.Version)
			return
		}
	}
}
