package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_RestoredSideFileLosesStops (review 37 round 23): the side
// file is restored from an older copy (its ID kept, its Next far below
// the number p1 keeps for that file: plan.Replays). Every stop recorded
// in it from then on gets a number p1 applied already, and onceApplied
// takes it as applied: the operator's stop is lost, told "give the
// command again", and lost again (here twice), up to as many times as
// the file went back (here 9), while the executor keeps starting p1's reboots. The
// regression is plain to see when the record is applied (the plan's
// number for the file is above the file's own Next: no record of this
// file was ever numbered that high), so the record cannot have been
// applied. Ground truth: p1's state read from the store itself.
func TestReview37_RestoredSideFileLosesStops(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	for i := range 10 {
		_, err := recordCommand(e.ctx, e.store, "p1", []string{"stop", "run"}[i%2], time.Now().UTC())
		require.NoError(t, err)
		s, err := e.openStore()
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"))
	// The file restored from its copy taken after the first command.
	require.NoError(t, withCmdFile(e.ctx, e.store, func(c *cmdFile) (bool, error) {
		c.Next, c.Records = 1, c.Records[:1]
		return true, nil
	}))

	// The operator is told the stop did not hold and to give it again:
	// the second time at the latest, it must land.
	var said []string
	for range 2 {
		var out, errw bytes.Buffer
		e.out, e.errw = &out, &errw
		code := e.command("stop", []string{"p1", "--store", e.store})
		said = append(said, fmt.Sprintf("exit %d: %s%s", code, out.String(), errw.String()))
	}
	require.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"),
		"two stops after the restore are both lost: the restored file numbers them 2 and 3, at or below the 10 p1 keeps for that file, so each is taken as applied already; the operator was told: %q", said)
}
