package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Server is one server of the fleet, as Create sees it.
type Server struct {
	UUID     string
	Hostname string
	// Platform is the platform it runs now.
	Platform string
	// Core: hosts core services. Headnode: it is the headnode (and core).
	Core     bool
	Headnode bool
	// Labels are its failure domains and any other labels (rack: r12).
	Labels map[string]string
}

// Selection says which servers a plan reboots. The zero value selects the
// servers named in CreateOptions.Servers.
type Selection int

const (
	// SelectList: the servers named in CreateOptions.Servers.
	SelectList Selection = iota
	// SelectCore: core servers (the headnode included).
	SelectCore
	// SelectNonCore: every server that is not core.
	SelectNonCore
	// SelectAll: every server, core first.
	SelectAll
)

// Limit is a count or a percentage of the plan's servers (Spec's
// Concurrency, FailureBudget, Ramp, DomainLimits). The zero value is zero
// servers. It is not remediation.MaxUnhealthy, the storm guard's bound on
// unhealthy machines, whose zero value means no limit.
type Limit struct {
	N       int
	Percent bool
}

// Count returns n servers.
func Count(n int) Limit { return Limit{N: n} }

// Percent returns p percent of the plan's servers.
func Percent(p int) Limit { return Limit{N: p, Percent: true} }

// Of resolves the limit for a plan of total servers; percentages round
// down.
func (l Limit) Of(total int) int {
	if l.Percent {
		return total * l.N / 100
	}
	return l.N
}

// CreateOptions are the options of the seed's reboot-plan create.
type CreateOptions struct {
	// UUID of the new plan (the caller generates it: no randomness here).
	UUID string
	// Target is the boot platform to reboot into.
	Target string
	// Select and Servers (UUIDs or hostnames) choose the servers.
	Select  Selection
	Servers []string
	// Concurrency: servers offline at once, as a count or a percentage of
	// the plan's servers (at least 1 after rounding down). The seed's
	// default is 5; the zero Limit is an error.
	Concurrency Limit
	// FailureBudget: reboots that may fail before the plan stops.
	FailureBudget Limit
	// IgnoreWarnings creates the plan despite warnings.
	IgnoreWarnings bool
	// SkipCurrent leaves out servers already on Target.
	SkipCurrent bool
	// DryRun marks the plan: it goes through the motions without jobs.
	DryRun bool
	// Existing plans, to refuse servers that are in an unfinished one
	// early. The store's Create checks this again, so forgetting it is
	// safe.
	Existing []Plan
	// CreatedAt is the creation time recorded in the plan; it makes the
	// plan's job identities unique (JobUUID).
	CreatedAt time.Time
	// Windows are the plan's maintenance windows (nil: any time).
	Windows *Windows
	// Ramp is the canary ramp's stages (ParseRamp), percentages of the
	// plan's servers rounded down to at least 1 and to no fewer than the
	// stage before.
	Ramp []Limit
	// DomainLimits cap the servers offline per failure domain; with them,
	// the servers that are not core start in an order that interleaves
	// the domains (by the limits' labels, in order), so that a limit does
	// not serialise the plan.
	DomainLimits []DomainLimit
	// Conditions are the plan's blocking conditions.
	Conditions []Condition
}

// Create errors; Create returns them wrapped with the servers concerned.
var (
	ErrUnknownServer   = errors.New("plan: unknown server")
	ErrDuplicateServer = errors.New("plan: server listed twice")
	ErrConcurrency     = errors.New("plan: concurrency must be at least 1")
	ErrWarnings        = errors.New("plan: not created because of warnings (they can be ignored)")
	ErrEmpty           = errors.New("plan: no server to reboot")
	ErrNoUUID          = errors.New("plan: missing plan uuid")

	// ErrInOtherPlan is Create's ErrServerInPlan: errors wrapping it also
	// match ErrServerInPlan (which a store's Create returns for a plan
	// made since), and its text says which check found it.
	ErrInOtherPlan = fmt.Errorf("%w (found when the plan was made)", ErrServerInPlan)
)

// WarningKind is the kind of a creation warning.
type WarningKind string

// Warning kinds.
const (
	WarnAlreadyCurrent WarningKind = "already on target platform"
	WarnDowngrade      WarningKind = "downgrade"
)

// Warning is a server that would reboot into its current platform or an
// older one.
type Warning struct {
	Kind     WarningKind
	Server   string
	Current  string
	Target   string
	Hostname string
}

// String formats the warning for a person.
func (w Warning) String() string {
	return fmt.Sprintf("%s (%s): %s: %s -> %s", w.Hostname, w.Server, w.Kind, w.Current, w.Target)
}

// Create builds a plan from the fleet. It returns the warnings it found;
// with warnings and no IgnoreWarnings it returns ErrWarnings and no plan.
// With DryRun the plan is returned but marked dry-run. Create is pure.
func Create(fleet []Server, o CreateOptions) (Plan, []Warning, error) {
	if o.UUID == "" {
		return Plan{}, nil, ErrNoUUID
	}
	if err := ValidUUID(o.UUID); err != nil {
		return Plan{}, nil, err
	}
	byKey := make(map[string]int, 2*len(fleet))
	for i, s := range fleet {
		byKey[s.UUID] = i
		if s.Hostname != "" {
			byKey[s.Hostname] = i
		}
	}
	var chosen []int
	switch o.Select {
	case SelectList:
		seen := map[int]bool{}
		var unknown, dup []string
		for _, k := range o.Servers {
			i, ok := byKey[k]
			switch {
			case !ok:
				unknown = append(unknown, k)
			case seen[i]:
				dup = append(dup, k)
			default:
				seen[i] = true
				chosen = append(chosen, i)
			}
		}
		if len(unknown) > 0 {
			return Plan{}, nil, fmt.Errorf("%w: %s", ErrUnknownServer, strings.Join(unknown, ", "))
		}
		if len(dup) > 0 {
			return Plan{}, nil, fmt.Errorf("%w: %s", ErrDuplicateServer, strings.Join(dup, ", "))
		}
	default:
		for i, s := range fleet {
			core := s.Core || s.Headnode
			if o.Select == SelectAll || o.Select == SelectCore && core || o.Select == SelectNonCore && !core {
				chosen = append(chosen, i)
			}
		}
	}

	busy := map[string]string{}
	for _, p := range o.Existing {
		if p.Unfinished() && !p.DryRun {
			for _, r := range p.Reboots {
				busy[r.ServerUUID] = p.UUID
			}
		}
	}
	var warns []Warning
	var reboots []Reboot
	var inOther []string
	for _, i := range chosen {
		s := fleet[i]
		if p, ok := busy[s.UUID]; ok {
			inOther = append(inOther, s.UUID+" (plan "+p+")")
			continue
		}
		c := ComparePlatforms(s.Platform, o.Target)
		if c == 0 && o.SkipCurrent {
			continue
		}
		if c >= 0 {
			kind := WarnAlreadyCurrent
			if c > 0 {
				kind = WarnDowngrade
			}
			warns = append(warns, Warning{Kind: kind, Server: s.UUID, Hostname: s.Hostname, Current: s.Platform, Target: o.Target})
		}
		reboots = append(reboots, Reboot{ServerUUID: s.UUID, ServerHostname: s.Hostname, BootPlatform: o.Target,
			CurrentPlatform: s.Platform, Headnode: s.Headnode, Core: s.Core || s.Headnode, Labels: maps.Clone(s.Labels)})
	}
	if len(inOther) > 0 {
		return Plan{}, nil, fmt.Errorf("%w: %s", ErrInOtherPlan, strings.Join(inOther, ", "))
	}
	if len(reboots) == 0 {
		return Plan{}, warns, ErrEmpty
	}
	if o.Concurrency.N < 1 {
		return Plan{}, warns, fmt.Errorf("%w (got %d)", ErrConcurrency, o.Concurrency.N)
	}
	conc := max(o.Concurrency.Of(len(reboots)), 1) // a percentage rounds down, to at least 1
	if len(warns) > 0 && !o.IgnoreWarnings {
		return Plan{}, warns, fmt.Errorf("%w: %d server(s)", ErrWarnings, len(warns))
	}
	// Order: headnode, other core servers, the rest; by hostname within.
	rank := func(r Reboot) int {
		switch {
		case r.Headnode:
			return 0
		case r.Core:
			return 1
		}
		return 2
	}
	sort.SliceStable(reboots, func(i, j int) bool {
		if a, b := rank(reboots[i]), rank(reboots[j]); a != b {
			return a < b
		}
		return reboots[i].ServerHostname < reboots[j].ServerHostname
	})
	if len(o.DomainLimits) > 0 {
		labels := make([]string, len(o.DomainLimits))
		for i, d := range o.DomainLimits {
			labels[i] = d.Label
		}
		first := sort.Search(len(reboots), func(i int) bool { return !reboots[i].Core })
		copy(reboots[first:], interleave(reboots[first:], labels))
	}
	var created *time.Time
	if !o.CreatedAt.IsZero() {
		created = tp(o.CreatedAt)
	}
	var ramp []int
	for _, l := range o.Ramp {
		// At least 1, and never below the stage before (20% of a small
		// plan may be fewer than the 5 before it).
		ramp = append(ramp, max(l.Of(len(reboots)), 1, slices.Max(append([]int{0}, ramp...))))
	}
	var windows *Windows
	if o.Windows != nil {
		w := *o.Windows
		w.Weekly, w.Ranges = slices.Clone(w.Weekly), slices.Clone(w.Ranges)
		windows = &w
	}
	p := Plan{UUID: o.UUID, State: StateCreated, Concurrency: conc, DryRun: o.DryRun, CreatedAt: created,
		FailureBudget: max(o.FailureBudget.Of(len(reboots)), 0), Reboots: reboots, Windows: windows, Ramp: ramp,
		DomainLimits: slices.Clone(o.DomainLimits), Conditions: slices.Clone(o.Conditions)}
	if err := p.checkPolicy(); err != nil {
		return Plan{}, warns, err
	}
	for _, r := range reboots {
		if err := checkLabels(r.Labels); err != nil {
			return Plan{}, warns, fmt.Errorf("server %s: %w", r.ServerHostname, err)
		}
	}
	return p, warns, nil
}

// ComparePlatforms compares platform versions as versions, not strings:
// runs of digits compare as numbers, other runs as text, so "9" < "10" and
// "20150901T012345Z" < "20151001T000000Z". It returns -1, 0 or +1.
func ComparePlatforms(a, b string) int {
	ca, cb := chunks(a), chunks(b)
	for i := 0; i < len(ca) && i < len(cb); i++ {
		x, y := ca[i], cb[i]
		xn, xerr := strconv.ParseUint(x, 10, 64)
		yn, yerr := strconv.ParseUint(y, 10, 64)
		switch {
		case xerr == nil && yerr == nil:
			if xn != yn {
				return cmp(xn < yn)
			}
		case x != y:
			return cmp(x < y)
		}
	}
	switch {
	case len(ca) < len(cb):
		return -1
	case len(ca) > len(cb):
		return 1
	}
	return 0
}

func cmp(less bool) int {
	if less {
		return -1
	}
	return 1
}

// chunks splits s into runs of digits and runs of other characters
// (separators '.', '-', '_' dropped).
func chunks(s string) []string {
	var out []string
	start := -1
	digit := false
	for i := 0; i <= len(s); i++ {
		end := i == len(s)
		var c byte
		if !end {
			c = s[i]
		}
		sep := end || c == '.' || c == '-' || c == '_'
		isDigit := !sep && c >= '0' && c <= '9'
		if start >= 0 && (sep || isDigit != digit) {
			out = append(out, s[start:i])
			start = -1
		}
		if !sep && start < 0 {
			start, digit = i, isDigit
		}
	}
	return out
}
