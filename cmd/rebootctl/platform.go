package main

// Which platform each server runs (issue 27, point 4). rebootctl does not
// choose what a server boots: the operator stages the target platform
// (boot image, PXE or boot configuration) before running the plan, and a
// plan only power-cycles. A reboot that ends "done" (power-cycled, health
// check passing) is recorded in the plan store with the platform it was
// for; plan create takes that record as the server's platform when it is
// newer than the inventory's `platform` key, so that the same plan is not
// created again without an "already on the target platform" warning.

import (
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// reached is the platform a finished plan rebooted a server into.
type reached struct {
	Platform string
	Plan     string
	At       time.Time
}

// platformsReached returns the servers with Platform set to the newest
// platform a stored plan (not a dry run) rebooted them into, when that is
// newer than the inventory's; and those records by server UUID.
func platformsReached(servers []plan.Server, plans []plan.Plan) ([]plan.Server, map[string]reached) {
	last := map[string]reached{}
	for _, p := range plans {
		if p.DryRun {
			continue
		}
		for _, r := range p.Reboots {
			if r.Step != plan.StepDone || r.OperationalAt == nil || r.BootPlatform == "" {
				continue
			}
			if cur, ok := last[r.ServerUUID]; !ok || r.OperationalAt.After(cur.At) {
				last[r.ServerUUID] = reached{Platform: r.BootPlatform, Plan: p.UUID, At: *r.OperationalAt}
			}
		}
	}
	out := make([]plan.Server, len(servers))
	used := map[string]reached{}
	for i, s := range servers {
		out[i] = s
		if r, ok := last[s.UUID]; ok && plan.ComparePlatforms(r.Platform, s.Platform) > 0 {
			out[i].Platform = r.Platform
			used[s.UUID] = r
		}
	}
	return out, used
}

// reachedNote says where a server's platform comes from, if not from the
// inventory.
func reachedNote(r reached, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (plan %s rebooted it into %s at %s; the inventory says older)", r.Plan, r.Platform, r.At.UTC().Format("2006-01-02 15:04"))
}
