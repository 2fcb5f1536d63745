package plan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DomainLimit caps the plan's servers offline at once in each failure
// domain of one label: the servers whose label Label has the same value
// (rack r12, zone z1). A server without the label is in no domain of it.
// Offline has its one meaning (Offline): servers down for other reasons
// count in their domain too.
type DomainLimit struct {
	Label string `json:"label"`
	// Max servers offline per value; with Percent, Max percent of the
	// plan's servers with that value, rounded down, at least 1.
	Max     int  `json:"max"`
	Percent bool `json:"percent,omitempty"`
}

// Of is the limit for a domain of size servers of the plan.
func (d DomainLimit) Of(size int) int {
	if d.Percent {
		return max(size*d.Max/100, 1)
	}
	return d.Max
}

// String formats the limit as ParseDomainLimit reads it.
func (d DomainLimit) String() string {
	if d.Percent {
		return fmt.Sprintf("%s=%d%%", d.Label, d.Max)
	}
	return fmt.Sprintf("%s=%d", d.Label, d.Max)
}

// ErrPolicy is wrapped by errors about a plan's ramp, domain limits,
// conditions and labels.
var ErrPolicy = errors.New("plan: invalid plan policy")

// ParseDomainLimit parses LABEL=N (at most N servers offline per value of
// the label) or LABEL=P% (at most P percent of the plan's servers with
// that value, at least 1). Errors wrap ErrPolicy.
func ParseDomainLimit(s string) (DomainLimit, error) {
	label, n, ok := strings.Cut(s, "=")
	if !ok || label == "" {
		return DomainLimit{}, fmt.Errorf("%w: %q: want LABEL=N or LABEL=P%% (e.g. rack=1, zone=10%%)", ErrPolicy, s)
	}
	l, err := parseLimit(n)
	if err != nil {
		return DomainLimit{}, fmt.Errorf("%w: %q: %v", ErrPolicy, s, err)
	}
	d := DomainLimit{Label: label, Max: l.N, Percent: l.Percent}
	if err := checkLabel(label, "x"); err != nil {
		return DomainLimit{}, err
	}
	return d, nil
}

// parseLimit parses N (>= 1) or P% (1 to 100).
func parseLimit(s string) (Limit, error) {
	pct := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 1 || pct && n > 100 {
		return Limit{}, fmt.Errorf("%q: want a count >= 1 or a percentage 1%%-100%%", s)
	}
	if pct {
		return Percent(n), nil
	}
	return Count(n), nil
}

// ParseRamp parses a canary ramp: comma-separated stages, each a count or
// a percentage of the plan's servers ("1,5,20%"). Errors wrap ErrPolicy.
func ParseRamp(s string) ([]Limit, error) {
	var out []Limit
	for _, f := range strings.Split(s, ",") {
		l, err := parseLimit(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%w: ramp %q: %v", ErrPolicy, s, err)
		}
		out = append(out, l)
	}
	if len(out) > 100 {
		return nil, fmt.Errorf("%w: ramp %q: at most 100 stages", ErrPolicy, s)
	}
	return out, nil
}

// RampLimit is the concurrency in force once done reboots of the plan are
// done: stage k of ramp is in force until ramp[0]+...+ramp[k] reboots are
// done; after the last stage, concurrency. Every stage is capped by
// concurrency. Failed reboots do not move the ramp on: a bad target
// platform keeps hitting one server at a time, and the failure budget
// stops the plan.
func RampLimit(ramp []int, concurrency, done int) int {
	sum := 0
	for _, n := range ramp {
		sum += n
		if done < sum {
			return min(n, concurrency)
		}
	}
	return concurrency
}

// Condition is a blocking condition: a check outside the fleet that must
// succeed before any reboot starts (no alert firing, no pod of a kind
// present). The fleet runs Command (argv, no shell) and reports the
// result in Observations.Conditions; the plan's decision only reads it.
type Condition struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// ConditionResult is the last result of a blocking condition.
type ConditionResult struct {
	// OK: the check succeeded (the command exited 0).
	OK bool
	// Output is what it printed (the plan keeps MaxConditionOutput bytes
	// of it, control characters replaced).
	Output string
	// At is when it was checked.
	At time.Time
}

// MaxConditionOutput bounds the condition output a plan keeps.
const MaxConditionOutput = 2048

// CleanOutput returns s as a plan keeps a condition's output: invalid
// UTF-8 and control characters (but newlines and tabs) replaced by '?',
// trailing space trimmed, at most MaxConditionOutput bytes.
func CleanOutput(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len()+utf8.RuneLen(r) > MaxConditionOutput {
			break
		}
		if r == utf8.RuneError || r != '\n' && r != '\t' && !unicode.IsPrint(r) && r != ' ' {
			r = '?'
		}
		b.WriteRune(r)
	}
	return strings.TrimRightFunc(b.String(), unicode.IsSpace)
}

func checkLabel(k, v string) error {
	if k == "" || len(k) > 253 || len(v) > 253 || strings.ContainsFunc(k+v, unicode.IsControl) {
		return fmt.Errorf("%w: label %q=%q: keys of 1 to 253 characters, values up to 253, no control characters", ErrPolicy, k, v)
	}
	return nil
}

func checkLabels(ls map[string]string) error {
	if len(ls) > 64 {
		return fmt.Errorf("%w: %d labels, at most 64", ErrPolicy, len(ls))
	}
	for k, v := range ls {
		if err := checkLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkPolicy validates the windows, ramp, domain limits and conditions.
func (p Plan) checkPolicy() error {
	if err := p.Windows.check(); err != nil {
		return err
	}
	if len(p.Ramp) > 100 {
		return fmt.Errorf("%w: ramp of %d stages, at most 100", ErrPolicy, len(p.Ramp))
	}
	for i, n := range p.Ramp {
		if n < 1 {
			return fmt.Errorf("%w: ramp stage %d < 1", ErrPolicy, n)
		}
		if i > 0 && n < p.Ramp[i-1] {
			return fmt.Errorf("%w: ramp %v goes down (a canary ramp only goes up)", ErrPolicy, p.Ramp)
		}
	}
	seen := map[string]bool{}
	for _, d := range p.DomainLimits {
		if err := checkLabel(d.Label, ""); err != nil {
			return err
		}
		if d.Max < 1 || d.Percent && d.Max > 100 {
			return fmt.Errorf("%w: domain limit %s: want at least 1 (a percentage at most 100%%)", ErrPolicy, d)
		}
		if seen[d.Label] {
			return fmt.Errorf("%w: two domain limits for label %q", ErrPolicy, d.Label)
		}
		seen[d.Label] = true
	}
	if len(p.DomainLimits) > 8 {
		return fmt.Errorf("%w: %d domain limits, at most 8", ErrPolicy, len(p.DomainLimits))
	}
	names := map[string]bool{}
	for _, c := range p.Conditions {
		if c.Name == "" || len(c.Name) > 64 || strings.ContainsFunc(c.Name, unicode.IsControl) || len(c.Command) == 0 || c.Command[0] == "" {
			return fmt.Errorf("%w: blocking condition %q: a name of 1 to 64 characters and a command", ErrPolicy, c.Name)
		}
		if names[c.Name] {
			return fmt.Errorf("%w: two blocking conditions named %q", ErrPolicy, c.Name)
		}
		names[c.Name] = true
	}
	if len(p.Conditions) > 16 {
		return fmt.Errorf("%w: %d blocking conditions, at most 16", ErrPolicy, len(p.Conditions))
	}
	if len(p.WaitingOutput) > MaxConditionOutput {
		return fmt.Errorf("%w: waiting output over %d bytes", ErrPolicy, MaxConditionOutput)
	}
	return nil
}

// DomainTable is the failure domain of every server of a plan for each
// of its DomainLimits, and the size of every domain: what a pass on a
// partial view needs to count the servers offline per domain among the
// reboots it did not load. A plan's servers and their labels never
// change, so a table is built once per plan (DomainTableOf) and shared,
// never modified.
type DomainTable struct {
	labels []string
	values [][]string       // [limit][position]
	sizes  []map[string]int // [limit] value -> servers
}

// DomainTableOf builds the domain table of a whole plan, in O(servers).
func DomainTableOf(p Plan) *DomainTable {
	t := &DomainTable{}
	for _, d := range p.DomainLimits {
		vals := make([]string, len(p.Reboots))
		sizes := map[string]int{}
		for i, r := range p.Reboots {
			if v := r.Labels[d.Label]; v != "" {
				vals[i] = v
				sizes[v]++
			}
		}
		t.labels = append(t.labels, d.Label)
		t.values = append(t.values, vals)
		t.sizes = append(t.sizes, sizes)
	}
	return t
}

// fits reports whether the table is for the domain limits of v's plan and
// agrees with the reboots v loaded.
func (t *DomainTable) fits(v View) bool {
	if t == nil || len(t.labels) != len(v.DomainLimits) {
		return false
	}
	for k, d := range v.DomainLimits {
		if t.labels[k] != d.Label || len(t.values[k]) != v.Index.Total {
			return false
		}
		for i, r := range v.Reboots {
			if p := v.pos(i); p >= len(t.values[k]) || t.values[k][p] != r.Labels[d.Label] {
				return false
			}
		}
	}
	return true
}

// domainCount counts the plan's servers offline per domain in one pass.
type domainCount struct {
	limits []DomainLimit
	table  *DomainTable // nil: unknown for the reboots not loaded
	loaded []Reboot     // the view's reboots (sizes when table is nil)
	off    []map[string]int
	// unknown: servers offline whose domains are not known; they count
	// in every domain (safe: it may hold the plan, never let more start).
	unknown int
}

// add counts r as offline (delta 1) or no longer (-1).
func (d *domainCount) add(r *Reboot, delta int) {
	for k, l := range d.limits {
		if v := r.Labels[l.Label]; v != "" {
			d.off[k][v] += delta
		}
	}
}

func (d *domainCount) size(k int, v string) int {
	if d.table != nil {
		return d.table.sizes[k][v]
	}
	n := 0 // the loaded reboots only: fewer, so a percentage is lower (safe)
	for _, r := range d.loaded {
		if r.Labels[d.limits[k].Label] == v {
			n++
		}
	}
	return n
}

// full says why r may not start (self: r counts as offline already), ""
// if no domain of r is at its limit.
func (d *domainCount) full(r *Reboot, self bool) string {
	if d == nil {
		return ""
	}
	for k, l := range d.limits {
		v := r.Labels[l.Label]
		if v == "" {
			continue
		}
		lim := l.Of(d.size(k, v))
		if n := d.off[k][v] + d.unknown - b2i(self); n >= lim {
			return fmt.Sprintf("waiting: %s waits for %s %s: %d server(s) offline there, limit %d", r.ServerHostname, l.Label, v, n, lim)
		}
	}
	return ""
}

// interleave orders rs (sorted by hostname) so that consecutive reboots
// are in different failure domains, spreading each domain evenly over the
// order: by the first label's values, each value's servers interleaved by
// the next label, and so on. Servers without a label form their own group.
func interleave(rs []Reboot, labels []string) []Reboot {
	if len(labels) == 0 || len(rs) < 2 {
		return rs
	}
	groups := map[string][]Reboot{}
	var keys []string
	for _, r := range rs {
		v := r.Labels[labels[0]]
		if _, ok := groups[v]; !ok {
			keys = append(keys, v)
		}
		groups[v] = append(groups[v], r)
	}
	sort.Strings(keys)
	type slot struct {
		at    float64
		group int
		r     Reboot
	}
	var slots []slot
	for g, k := range keys {
		sub := interleave(groups[k], labels[1:])
		for i, r := range sub {
			// Element i of n sits at (i+0.5)/n: every group spread over
			// the whole order, in proportion to its size.
			slots = append(slots, slot{(float64(i) + 0.5) / float64(len(sub)), g, r})
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.group - b.group
	})
	out := make([]Reboot, len(slots))
	for i, s := range slots {
		out[i] = s.r
	}
	return out
}
