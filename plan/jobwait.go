package plan

import (
	"fmt"
	"time"
)

// jobWaiting names what a reboot in step job waits for when the fleet
// shows its job not finished: queued (not started), started and not
// drained, or drained and running; with how long it waited and the
// timeout that ends the wait (DrainTimeout for the drain, JobTimeout for
// the step).
func jobWaiting(r *Reboot, j JobObs, inStep time.Duration, now time.Time, c Config) string {
	switch {
	case !j.Started:
		return fmt.Sprintf("waiting: reboot of %s waits for its job: job queued, not started by the fleet (in step job for %s, at most %s, then the job is cancelled and the reboot fails)",
			r.ServerHostname, inStep.Round(time.Second), c.JobTimeout)
	case !j.Drained:
		draining := time.Duration(0)
		if r.DrainSince != nil {
			draining = now.Sub(*r.DrainSince)
		}
		return fmt.Sprintf("waiting: reboot of %s waits for its job: job started, drain not finished (draining for %s, at most %s, then the job is cancelled and the reboot fails)",
			r.ServerHostname, draining.Round(time.Second), c.DrainTimeout)
	default:
		return fmt.Sprintf("waiting: reboot of %s waits for its job: server drained, job running (in step job for %s, at most %s, then the job is cancelled and the reboot fails)",
			r.ServerHostname, inStep.Round(time.Second), c.JobTimeout)
	}
}
