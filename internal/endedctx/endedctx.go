// Package endedctx gives the conformance kits (reboot/reboottest and
// remediation/remediationtest) the ended contexts a store must refuse to
// write with: a cancelled one (Done closed), and one a reboot.Guard hands
// out after a pause that outlasted its lease (reboot.ClockBound past its
// deadline: Err non-nil while Done is not yet closed). A store that
// selects on Done only writes with the second; one that checks ctx.Err()
// just before it writes refuses both.
package endedctx

import (
	"context"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// Ended is one ended context and how the kit names it in a failure.
type Ended struct {
	Name string
	Ctx  context.Context
}

// From returns the ended contexts derived from parent: cancelled, and
// ended by the clock only (its Done parent's, open until parent's end).
func From(parent context.Context) []Ended {
	cancelled, cancel := context.WithCancel(parent)
	cancel()
	clock := reboot.ClockBound(pastDeadline{parent})
	return []Ended{
		{Name: "a context that was cancelled", Ctx: cancelled},
		{Name: "a context ended by the clock (reboot.ClockBound past its deadline after a pause: Err non-nil, Done not yet closed; check ctx.Err(), not only Done)", Ctx: clock},
	}
}

// pastDeadline is parent with a deadline that went by while its timer
// has not fired, as a process resumed from a pause sees it: Done is
// parent's, still open.
type pastDeadline struct{ context.Context }

// Deadline is a second before now.
func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }
