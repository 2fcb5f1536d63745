package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// metaAbandoned is the key, in the plan store's meta bucket, of the
// servers operators gave up on (plan abandon): the executor applies them
// at its next pass.
const metaAbandoned = "abandoned"

// abandonRecord is one operator's abandon of a server in a plan.
type abandonRecord struct {
	Plan string    `json:"plan"`
	At   time.Time `json:"at"`
	By   string    `json:"by,omitempty"`
	// Hostname is the server's hostname when it was abandoned (for
	// messages once the inventory no longer lists it).
	Hostname string `json:"hostname,omitempty"`
}

// readAbandoned returns the abandons recorded in the store (server UUID
// to record).
func readAbandoned(raw []byte) map[string]abandonRecord {
	out := map[string]abandonRecord{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// abandonWhy is what the fleet records and shows for an abandon.
func (a abandonRecord) why() string {
	why := "plan abandon at " + a.At.UTC().Format(time.RFC3339)
	if a.By != "" {
		why += " by " + a.By
	}
	return why
}

// abandon is "rebootctl plan abandon PLAN SERVER": the operator gives up
// on one server of a plan. The executor never powers it on or off again,
// ends its job (undrained, failed) and reports its last known state.
func (e *env) abandon(args []string) int {
	fs := flag.NewFlagSet("rebootctl plan abandon", flag.ContinueOnError)
	commonFlags(fs, e)
	rest, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 2 {
		fmt.Fprintln(e.errw, "rebootctl plan abandon: give a plan UUID and a server (hostname or UUID)")
		return exitUsage
	}
	inv, err := inventory.Load(e.inventory)
	if err != nil {
		return e.fail(err)
	}
	s, ok := inv.Server(rest[1])
	if !ok {
		return e.fail(fmt.Errorf("plan abandon: no server %s in the inventory %s", rest[1], e.inventory))
	}
	st, err := e.openStore()
	if err != nil {
		return e.fail(err)
	}
	defer st.Close()
	p, err := st.Get(e.ctx, rest[0])
	if err != nil {
		return e.fail(fmt.Errorf("plan abandon: %s", explain(err, rest[0])))
	}
	found := false
	for _, r := range p.Reboots {
		found = found || r.ServerUUID == s.UUID
	}
	if !found {
		return e.fail(fmt.Errorf("plan abandon: plan %s does not reboot %s", p.UUID, s.Hostname))
	}
	if !p.Unfinished() {
		// An abandon in an ended plan while another plan reboots the
		// server would be taken back at once by that plan's job (or
		// replace an abandon made there): name the plan to give.
		running, err := runningPlanOf(e, st, s.UUID, p.UUID)
		if err != nil {
			return e.fail(err)
		}
		if running != "" {
			fmt.Fprintf(e.errw, "rebootctl plan abandon: plan %s has ended (%s), and plan %s reboots %s now: "+
				"abandon it there: rebootctl plan abandon %s %s\n", p.UUID, p.State, running, s.Hostname, running, s.Hostname)
			return exitUsage
		}
	}
	raw, err := st.GetMeta(e.ctx, metaAbandoned)
	if err != nil {
		return e.fail(err)
	}
	all := readAbandoned(raw)
	if prev, ok := all[s.UUID]; ok && prev.Plan == p.UUID {
		fmt.Fprintf(e.out, "%s was already abandoned in plan %s (%s)\n", s.Hostname, p.UUID, prev.why())
		return exitOK
	}
	all[s.UUID] = abandonRecord{Plan: p.UUID, At: time.Now().UTC(), By: os.Getenv("USER"), Hostname: s.Hostname}
	out, err := json.Marshal(all)
	if err != nil {
		return e.fail(err)
	}
	if err := st.PutMeta(e.ctx, metaAbandoned, out); err != nil {
		return e.fail(err)
	}
	fmt.Fprintf(e.out, "abandoned %s in plan %s: from its next pass the executor never powers it on or off again and ends its job (undrained, failed); "+
		"it still counts as offline while it is off or a power-off sent to it before may still take effect\n", s.Hostname, p.UUID)
	notes := serverNotes(e.readExecutor(st), s.UUID, time.Now())
	if len(notes) == 0 {
		notes = []string{"power: not known to the executor (no power cycle of it in progress)"}
	}
	fmt.Fprintf(e.out, "its last known state:\n")
	for _, n := range notes {
		fmt.Fprintf(e.out, "  %s\n", clean(n))
	}
	return exitOK
}

// runningPlanOf returns an unfinished plan other than except that reboots
// server ("" if none).
func runningPlanOf(e *env, st *plan.BoltStore, server, except string) (string, error) {
	heads, err := st.ListHeads(e.ctx)
	if err != nil {
		return "", err
	}
	for _, h := range heads {
		if h.UUID == except || h.State.Finished() {
			continue
		}
		p, err := st.Get(e.ctx, h.UUID)
		if err != nil {
			return "", err
		}
		if !p.Unfinished() {
			continue
		}
		for _, r := range p.Reboots {
			if r.ServerUUID == server {
				return p.UUID, nil
			}
		}
	}
	return "", nil
}

// applyAbandoned gives the fleet the abandons recorded in the store. An
// abandon of a server the inventory no longer lists is skipped (the
// executor never powers such a server anyway) and handed to skipped; one
// that fails does not stop the others: their errors are returned joined.
func applyAbandoned(fleet *inventory.Fleet, raw []byte, skipped func(server string, a abandonRecord)) error {
	var errs []error
	for server, a := range readAbandoned(raw) {
		err := fleet.Abandon(server, a.Plan, a.why())
		switch {
		case errors.Is(err, inventory.ErrUnknownServer):
			if skipped != nil {
				skipped(server, a)
			}
		case err != nil:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// abandonSkippedText is the operator's message for an abandon of a server
// the inventory no longer lists.
func abandonSkippedText(server string, a abandonRecord) string {
	name := server
	if a.Hostname != "" {
		name = a.Hostname + " (" + server + ")"
	}
	return fmt.Sprintf("%s, abandoned in plan %s, is no longer in the inventory: its abandon is skipped and this executor never powers it; "+
		"nothing to do, unless you want it rebooted again: then put it back in the inventory (with its bmc section) and restart the executor", name, a.Plan)
}
