package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ", ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// policyFlags are plan create's flags for the maintenance windows, the
// canary ramp, the failure-domain limits and the blocking conditions.
// Each, when given, replaces the inventory's plan section's key.
type policyFlags struct {
	windows, ranges, limits, conditions multi
	zone, ramp                          string
	expect                              time.Duration
}

func (pf *policyFlags) register(fs *flag.FlagSet) {
	fs.Var(&pf.windows, "window", `a weekly maintenance window, "DAYS HH:MM-HH:MM" (e.g. "Mon-Fri 22:00-06:00"); repeat for more; reboots start only inside one`)
	fs.Var(&pf.ranges, "window-range", "an absolute maintenance window, START/END in RFC 3339 (2026-12-24T00:00:00+01:00/2026-12-27T00:00:00+01:00); repeatable")
	fs.StringVar(&pf.zone, "time-zone", "", "the weekly windows' time zone (e.g. Europe/Berlin; default the inventory's, else UTC)")
	fs.DurationVar(&pf.expect, "expect-reboot", 0, "how long a reboot takes (job created to services up): none starts unless the window stays open that long (default: the 90th percentile of the plan's reboots done)")
	fs.StringVar(&pf.ramp, "ramp", "", `canary ramp: servers offline at once until that many reboots are done, stage by stage (e.g. "1,5,20%"), then --rate`)
	fs.Var(&pf.limits, "domain-limit", "at most so many servers offline per value of a label, LABEL=N or LABEL=P% (e.g. rack=1, zone=10%); repeatable")
	fs.Var(&pf.conditions, "condition", `a blocking condition, NAME=COMMAND (run by /bin/sh -c before each pass; reboots start only while it exits 0); repeatable`)
}

// apply sets o's windows, ramp, domain limits and conditions from the
// flags, else from the inventory.
func (pf *policyFlags) apply(inv inventory.Inventory, o *plan.CreateOptions) error {
	pol := inv.Plan
	o.Windows = pol.WindowsOf()
	if len(pf.windows) > 0 || len(pf.ranges) > 0 {
		zone := ""
		if o.Windows != nil {
			zone = o.Windows.TimeZone
		}
		o.Windows = &plan.Windows{TimeZone: zone, Weekly: pf.windows}
		for _, r := range pf.ranges {
			a, b, ok := strings.Cut(r, "/")
			start, err1 := time.Parse(time.RFC3339, a)
			end, err2 := time.Parse(time.RFC3339, b)
			if !ok || err1 != nil || err2 != nil {
				return fmt.Errorf("--window-range %q: want START/END in RFC 3339, e.g. 2026-12-24T00:00:00+01:00/2026-12-27T00:00:00+01:00", r)
			}
			o.Windows.Ranges = append(o.Windows.Ranges, plan.Range{Start: start, End: end})
		}
	}
	if o.Windows != nil && pf.zone != "" {
		o.Windows.TimeZone = pf.zone
	}
	if o.Windows != nil && pf.expect > 0 {
		o.Windows.Expect = pf.expect
	}
	if pf.zone != "" && o.Windows == nil || pf.expect > 0 && o.Windows == nil {
		return fmt.Errorf("--time-zone and --expect-reboot need maintenance windows (--window, --window-range, or the inventory's plan.windows)")
	}
	var err error
	if o.Ramp, err = pol.RampOf(); err != nil {
		return err
	}
	if pf.ramp != "" {
		if o.Ramp, err = plan.ParseRamp(pf.ramp); err != nil {
			return fmt.Errorf("--ramp: %w", err)
		}
	}
	if o.DomainLimits, err = pol.DomainLimitsOf(); err != nil {
		return err
	}
	if len(pf.limits) > 0 {
		o.DomainLimits = nil
		for _, s := range pf.limits {
			d, err := plan.ParseDomainLimit(s)
			if err != nil {
				return fmt.Errorf("--domain-limit: %w", err)
			}
			o.DomainLimits = append(o.DomainLimits, d)
		}
	}
	o.Conditions = pol.Conditions
	if len(pf.conditions) > 0 {
		o.Conditions = nil
		for _, c := range pf.conditions {
			name, cmd, ok := strings.Cut(c, "=")
			if !ok || name == "" || strings.TrimSpace(cmd) == "" {
				return fmt.Errorf("--condition %q: want NAME=COMMAND, e.g. no-alerts='check-alerts --critical'", c)
			}
			o.Conditions = append(o.Conditions, plan.Condition{Name: name, Command: []string{"/bin/sh", "-c", cmd}})
		}
	}
	return nil
}

// policyLines describes a plan's windows, ramp, limits and conditions for
// a person ("" lines left out).
func policyLines(p plan.Plan) []string {
	var out []string
	if w := p.Windows; !w.Empty() {
		zone := w.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		var ws []string
		ws = append(ws, w.Weekly...)
		for _, r := range w.Ranges {
			ws = append(ws, r.Start.Format(time.RFC3339)+" to "+r.End.Format(time.RFC3339))
		}
		line := fmt.Sprintf("maintenance windows (%s): %s", zone, strings.Join(ws, "; "))
		if w.Expect > 0 {
			line += fmt.Sprintf("; reboots expected to take %s", w.Expect)
		}
		out = append(out, line)
	}
	if len(p.Ramp) > 0 {
		var st []string
		for _, n := range p.Ramp {
			st = append(st, fmt.Sprint(n))
		}
		out = append(out, fmt.Sprintf("canary ramp: %s, then %d at once", strings.Join(st, ", "), p.Concurrency))
	}
	if len(p.DomainLimits) > 0 {
		var ls []string
		for _, d := range p.DomainLimits {
			ls = append(ls, d.String())
		}
		out = append(out, "at most offline per domain: "+strings.Join(ls, ", "))
	}
	for _, c := range p.Conditions {
		out = append(out, fmt.Sprintf("blocking condition %s: %s", c.Name, strings.Join(c.Command, " ")))
	}
	return out
}

// outputLines is a blocking condition's output for watch: at most 8
// lines, indented.
func outputLines(out string) []string {
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 8 {
		lines = append(lines[:8], fmt.Sprintf("(%d more lines)", len(lines)-8))
	}
	for i, l := range lines {
		lines[i] = "    | " + l
	}
	return lines
}
