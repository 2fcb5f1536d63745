package main

// Messages for operators: their words, hostnames, the fix; never a Go
// identifier (issue 27).

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rebootkit/rebootkit/plan"
)

// warningText is one creation warning, by hostname.
func warningText(w plan.Warning) string {
	if w.Kind == plan.WarnDowngrade {
		return fmt.Sprintf("%s runs platform %s, newer than the target %s (a downgrade)", w.Hostname, w.Current, w.Target)
	}
	return fmt.Sprintf("%s already runs the target platform %s", w.Hostname, w.Target)
}

// warningsRefused is the one message of a plan refused for its warnings.
func warningsRefused(warns []plan.Warning) string {
	current := 0
	for _, w := range warns {
		if w.Kind == plan.WarnAlreadyCurrent {
			current++
		}
	}
	msg := fmt.Sprintf("plan not created: %d warning(s) above.\n  create it anyway:                  add -W (--ignore-warnings)", len(warns))
	if current > 0 {
		msg += "\n  leave out servers already on it:   add -s (--skip-current)"
	}
	return msg
}

// inOtherPlans explains which of the chosen servers are in unfinished
// plans, by hostname, and how to end those plans.
func inOtherPlans(chosen []plan.Reboot, existing []plan.Plan) string {
	mine := map[string]bool{}
	for _, r := range chosen {
		mine[r.ServerUUID] = true
	}
	var b strings.Builder
	sort.Slice(existing, func(i, j int) bool { return existing[i].UUID < existing[j].UUID })
	for _, o := range existing {
		if !o.Unfinished() || o.DryRun {
			continue
		}
		var names []string
		inFlight := 0
		for _, r := range o.Reboots {
			if mine[r.ServerUUID] {
				names = append(names, r.ServerHostname)
			}
			if r.Step.InFlight() {
				inFlight++
			}
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%d server(s) are in plan %s (%s), which has not finished: %s\n", len(names), o.UUID, o.State, list(names, 10))
		switch {
		case o.State.Finished():
			fmt.Fprintf(&b, "  it was %s and %d reboot(s) are still finishing; wait for them:  rebootctl plan watch %s\n", o.State, inFlight, o.UUID)
		default:
			fmt.Fprintf(&b, "  a server is rebooted by one plan at a time; let that plan finish, or end it:\n    rebootctl plan cancel %s\n", o.UUID)
		}
	}
	if b.Len() == 0 {
		return "a server is in another unfinished plan (rebootctl plan list shows them)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// list joins names, at most max of them and a count of the rest.
func list(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}

// commandDone is what run, stop and cancel print, from the plan's state
// read back from the store after the command (p): a stop or cancel says
// so only when the plan is in the state it leads to (notInEffect is the
// error otherwise).
func commandDone(name string, p plan.View) string {
	n := len(p.Index.InFlight)
	switch {
	case name == "cancel" && p.State == plan.StateCanceled:
		if n == 0 {
			return fmt.Sprintf("plan %s: canceled; no reboot was in flight, nothing more will happen", p.UUID)
		}
		return fmt.Sprintf("plan %s: canceled; no new reboot starts, and the %d reboot(s) in flight are withdrawn: a server not yet powered off is undrained and left running, "+
			"one whose power-off may already have been accepted completes its power cycle (on again) and is undrained (watch them: rebootctl plan watch %s)", p.UUID, n, p.UUID)
	case name == "stop" && p.State == plan.StateStopped:
		return fmt.Sprintf("plan %s: stopped; no new reboot starts, %d in flight will finish; resume with: rebootctl plan run %s", p.UUID, n, p.UUID)
	case (name == "stop" || name == "cancel") && p.State.Finished():
		return fmt.Sprintf("plan %s: %s; no new reboot starts, %d in flight will finish", p.UUID, p.State, n)
	}
	return fmt.Sprintf("plan %s: %s", p.UUID, p.State)
}

// notInEffect is the error of a stop or cancel whose plan, read back from
// the store after it, is not in the state the command leads to nor
// finished (another operator's later run, or a command taken as applied
// already): the operator is not told it stopped.
func notInEffect(name string, p plan.View) error {
	if name != "stop" && name != "cancel" || p.State == plan.StateStopped && name == "stop" || p.State.Finished() {
		return nil
	}
	return fmt.Errorf("the %s of plan %s was applied, but the store now holds the plan %s (a later command changed it, or the %s was taken as applied already: "+
		"rebootctl plan show %s lists the plan's commands); give the command again if it must hold: rebootctl plan %s %s",
		name, p.UUID, p.State, name, p.UUID, name, p.UUID)
}

// interrupted is watch's message after Ctrl-C: what goes on in the
// executor and, while the plan may still start reboots, how to pause or
// end it.
func interrupted(v plan.View) string {
	id := v.UUID
	switch {
	case v.State.Finished():
		return fmt.Sprintf("\nwatch stopped; plan %s is %s: no new reboot starts, the %d in flight finish in the executor.\n  watch again:  rebootctl plan watch %s\n", id, v.State, len(v.Index.InFlight), id)
	case v.State == plan.StateStopped:
		return fmt.Sprintf("\nwatch stopped; plan %s is stopped (the reboots in flight finish in the executor).\n  resume it:  rebootctl plan run %s\n  end it:     rebootctl plan cancel %s\n", id, id, id)
	}
	return fmt.Sprintf("\nwatch stopped; plan %s keeps running in the executor.\n  pause it:  rebootctl plan stop %s\n  end it:    rebootctl plan cancel %s\n", id, id, id)
}

// explain rewrites the library's errors for operators.
func explain(err error, uuid string) string {
	switch {
	case errors.Is(err, plan.ErrNotFound):
		return fmt.Sprintf("no plan %s in the store (rebootctl plan list shows the plans; --store names the store)", uuid)
	case errors.Is(err, plan.ErrExists):
		return fmt.Sprintf("a plan %s exists already: choose another --uuid, or leave it out for a random one", uuid)
	case errors.Is(err, plan.ErrUnknownServer):
		_, names, _ := strings.Cut(err.Error(), plan.ErrUnknownServer.Error()+": ")
		return fmt.Sprintf("not in the inventory: %s (name servers by hostname or uuid, as the inventory does)", names)
	case errors.Is(err, plan.ErrDuplicateServer):
		_, names, _ := strings.Cut(err.Error(), plan.ErrDuplicateServer.Error()+": ")
		return fmt.Sprintf("named twice: %s", names)
	case errors.Is(err, plan.ErrEmpty):
		return "no server to reboot (with -s, every server chosen already runs the target platform)"
	case errors.Is(err, plan.ErrInvalidUUID):
		return fmt.Sprintf("%q is not a plan UUID (%s): rebootctl plan list shows the plans", uuid, uuidRule)
	case errors.Is(err, plan.ErrLocked):
		return "the plan store is busy (another rebootctl holds it); try again"
	}
	return err.Error()
}

// uuidRule is what a plan UUID may be (plan.ValidUUID).
const uuidRule = "1 to 128 letters, digits, '-', '_' and '.', starting with a letter or digit"

// chosen is the servers a plan with these options would reboot, whatever
// the other plans (for the message naming the ones in another plan).
func chosen(servers []plan.Server, o plan.CreateOptions) []plan.Reboot {
	o.Existing, o.IgnoreWarnings = nil, true
	p, _, err := plan.Create(servers, o)
	if err != nil {
		return nil
	}
	return p.Reboots
}
