package inventory

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// PlanPolicy is the inventory's plan section: the maintenance windows,
// canary ramp, failure-domain limits and blocking conditions that
// `rebootctl plan create` gives a new plan unless its flags say otherwise.
//
//	plan:
//	  windows:
//	    time_zone: Europe/Berlin
//	    weekly: ["Mon-Fri 22:00-06:00", "Sat,Sun 00:00-24:00"]
//	    ranges: [{start: 2026-12-24T00:00:00+01:00, end: 2026-12-27T00:00:00+01:00}]
//	    expect: 30m
//	  ramp: "1,5,20%"
//	  domain_limits: ["rack=1", "zone=10%"]
//	  conditions:
//	    - name: no-alerts
//	      command: [/usr/local/bin/check-alerts, --severity, critical]
type PlanPolicy struct {
	Windows *WindowsYAML `yaml:"windows"`
	// Ramp is the canary ramp, e.g. "1,5,20%" (plan.ParseRamp).
	Ramp string `yaml:"ramp"`
	// DomainLimits are LABEL=N or LABEL=P% (plan.ParseDomainLimit); the
	// labels are the servers' labels.
	DomainLimits []string `yaml:"domain_limits"`
	// Conditions are blocking conditions: commands (argv, no shell) the
	// executor runs before each pass of an unfinished plan; a reboot
	// starts only while each exits 0.
	Conditions []plan.Condition `yaml:"conditions"`
}

// WindowsYAML is plan.Windows as the inventory writes it.
type WindowsYAML struct {
	TimeZone string       `yaml:"time_zone"`
	Weekly   []string     `yaml:"weekly"`
	Ranges   []plan.Range `yaml:"ranges"`
	Expect   Duration     `yaml:"expect"`
}

// WindowsOf returns the windows (nil if none).
func (p PlanPolicy) WindowsOf() *plan.Windows {
	if p.Windows == nil {
		return nil
	}
	return &plan.Windows{TimeZone: p.Windows.TimeZone, Weekly: p.Windows.Weekly, Ranges: p.Windows.Ranges, Expect: time.Duration(p.Windows.Expect)}
}

// RampOf returns the parsed ramp (nil if none).
func (p PlanPolicy) RampOf() ([]plan.Limit, error) {
	if p.Ramp == "" {
		return nil, nil
	}
	return plan.ParseRamp(p.Ramp)
}

// DomainLimitsOf returns the parsed domain limits.
func (p PlanPolicy) DomainLimitsOf() ([]plan.DomainLimit, error) {
	var out []plan.DomainLimit
	for _, s := range p.DomainLimits {
		d, err := plan.ParseDomainLimit(s)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// check validates the section as a plan would. A windows section with a
// time zone or an expect and no window at all is refused: a plan would
// take it as "no restriction" (reboots at any time), the opposite of what
// its author meant.
func (p PlanPolicy) check() error {
	if w := p.Windows; w != nil && len(w.Weekly) == 0 && len(w.Ranges) == 0 {
		return fmt.Errorf("%w: plan.windows has no weekly window and no range (time_zone %q): reboots would start at any time; add weekly or ranges, or remove the windows section",
			ErrInvalid, w.TimeZone)
	}
	if _, err := p.RampOf(); err != nil {
		return fmt.Errorf("%w: plan.ramp: %v", ErrInvalid, err)
	}
	limits, err := p.DomainLimitsOf()
	if err != nil {
		return fmt.Errorf("%w: plan.domain_limits: %v", ErrInvalid, err)
	}
	q := plan.Plan{UUID: "check", State: plan.StateCreated, Concurrency: 1, Windows: p.WindowsOf(), DomainLimits: limits, Conditions: p.Conditions}
	if err := q.Validate(); err != nil {
		return fmt.Errorf("%w: plan: %v", ErrInvalid, err)
	}
	return nil
}

// ConditionTimeout bounds one run of a blocking condition's command.
const ConditionTimeout = 30 * time.Second

// conditions runs the blocking conditions of an unfinished plan, one after the other,
// each bounded by ConditionTimeout, with the inventory's command
// environment: a result per condition, checked now.
func (f *Fleet) conditions(ctx context.Context, p plan.Plan) map[string]plan.ConditionResult {
	// Unfinished, not only running: a reboot of a stopped or canceled plan
	// that has not created its job yet waits for them too.
	if len(p.Conditions) == 0 || !p.Unfinished() {
		return nil
	}
	out := make(map[string]plan.ConditionResult, len(p.Conditions))
	for _, c := range p.Conditions {
		at := f.now()
		var text string
		var err error
		if f.opts.command != nil {
			err = f.opts.command(ctx, c.Command)
			if err != nil {
				text = err.Error()
			}
		} else {
			cctx, cancel := context.WithTimeout(ctx, ConditionTimeout)
			cmd := exec.CommandContext(cctx, c.Command[0], c.Command[1:]...)
			cmd.Env = f.inv.CommandEnv(nil) // never the executor's whole environment (BMC passwords)
			var b limitedBuffer
			cmd.Stdout, cmd.Stderr = &b, &b
			err = cmd.Run()
			cancel()
			text = strings.TrimSpace(b.String())
			var exit *exec.ExitError
			switch {
			case cctx.Err() != nil && !errors.As(err, &exit):
				text += fmt.Sprintf("\n(no answer within %s)", ConditionTimeout)
			case err != nil && !errors.As(err, &exit):
				text += "\n" + err.Error()
			case err != nil:
				text += fmt.Sprintf("\n(exit status %d)", exit.ExitCode())
			}
		}
		out[c.Name] = plan.ConditionResult{OK: err == nil, Output: strings.TrimSpace(text), At: at}
	}
	return out
}

// limitedBuffer keeps the first plan.MaxConditionOutput bytes written.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := plan.MaxConditionOutput - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// checkLabels checks the servers' labels as a plan would.
func (inv *Inventory) checkLabels() error {
	for i, s := range inv.Servers {
		q := plan.Plan{UUID: "check", State: plan.StateCreated, Concurrency: 1,
			Reboots: []plan.Reboot{{ServerUUID: s.UUID, Labels: s.Labels}}}
		if err := q.Validate(); err != nil {
			return fmt.Errorf("%w: server %d (%s): labels: %v", ErrInvalid, i+1, s.UUID, err)
		}
	}
	return nil
}
