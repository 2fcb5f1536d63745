package remediation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Nouns are the words of an inventory that is not Cluster API's, for the
// messages remediation writes (State.Message, Decision.Reason, the storm
// guard's arithmetic). An empty field keeps Cluster API's word. Only the
// messages' own words are replaced: the names in them (a machine named
// node-3 in a group named machine-room) are kept as they are.
type Nouns struct {
	// Machine replaces "machine" (Machines, "machines": default Machine+"s").
	Machine, Machines string
	// Node replaces "node".
	Node string
	// Group replaces "cluster" (the storm guard's scope).
	Group string
	// HealthCheck replaces "health check".
	HealthCheck string
	// Unhealthy replaces "needs-remediation annotation" and
	// "needs-remediation" (your health check's verdict, e.g. "unhealthy
	// flag").
	Unhealthy string
}

// nounWords matches the words Nouns replace, longest first.
var nounWords = regexp.MustCompile(`\b(needs-remediation annotation|needs-remediation|health check|machines|machine|Machine|nodes|node|Node|cluster)\b`)

// The storm guard's reasons (MayStart) as format strings, and their
// patterns: Decide renders a GuardReason of these forms again with Nouns
// applied to the format, never to the names formatted into it.
const (
	reasonNotInFleet       = "machine %s is not in the fleet"
	reasonAlready          = "already remediating"
	reasonControlPlaneBusy = "another control-plane machine is being remediated"
	reasonOverLimit        = "%d of %d machines%s unhealthy, more than the limit %s (%d)"
	reasonWithinLimit      = "%d of %d machines%s unhealthy, within the limit %s"
	scopeBoth              = " of cluster %s under health check %s"
	scopeCluster           = " of cluster %s"
	scopeHealthCheck       = " under health check %s"
)

var (
	reNotInFleet = regexp.MustCompile(`^machine (.+) is not in the fleet$`)
	reOverLimit  = regexp.MustCompile(`^(\d+) of (\d+) machines(.*) unhealthy, more than the limit (\S+) \((\d+)\)$`)
	reWithin     = regexp.MustCompile(`^(\d+) of (\d+) machines(.*) unhealthy, within the limit (\S+)$`)
	reScopeBoth  = regexp.MustCompile(`^ of cluster (.+) under health check (.+)$`)
	reScopeOne   = regexp.MustCompile(`^ of cluster (.+)$`)
	reScopeCheck = regexp.MustCompile(`^ under health check (.+)$`)
)

// guard returns the storm guard's reason (MayStart's) in n's words: its
// format in them, the names in it as they are. A reason that is not
// MayStart's (a guard of your own) is left as it is.
func (n Nouns) guard(reason string) string {
	f := n.format
	if m := reNotInFleet.FindStringSubmatch(reason); m != nil {
		return fmt.Sprintf(f(reasonNotInFleet), m[1])
	}
	if reason == reasonAlready || reason == reasonControlPlaneBusy {
		return n.say(reason)
	}
	scope := func(s string) (string, bool) {
		if s == "" {
			return "", true
		}
		if m := reScopeBoth.FindStringSubmatch(s); m != nil {
			return fmt.Sprintf(f(scopeBoth), m[1], m[2]), true
		}
		if m := reScopeOne.FindStringSubmatch(s); m != nil {
			return fmt.Sprintf(f(scopeCluster), m[1]), true
		}
		if m := reScopeCheck.FindStringSubmatch(s); m != nil {
			return fmt.Sprintf(f(scopeHealthCheck), m[1]), true
		}
		return "", false
	}
	if m := reOverLimit.FindStringSubmatch(reason); m != nil {
		if sc, ok := scope(m[3]); ok {
			return fmt.Sprintf(strings.ReplaceAll(f(reasonOverLimit), "%d", "%s"), m[1], m[2], sc, m[4], m[5])
		}
	}
	if m := reWithin.FindStringSubmatch(reason); m != nil {
		if sc, ok := scope(m[3]); ok {
			return fmt.Sprintf(strings.ReplaceAll(f(reasonWithinLimit), "%d", "%s"), m[1], m[2], sc, m[4])
		}
	}
	return reason
}

// format returns the format string s in n's words (a '%' in a word is
// escaped).
func (n Nouns) format(s string) string {
	return n.sayWith(s, func(w string) string { return strings.ReplaceAll(w, "%", "%%") })
}

// sayAround returns s in n's words except for the storm guard's reason in
// it, which is rendered by guard, and the names given (hosts), each kept
// as it is where it stands as a whole name (not inside a longer one):
// the names in a message come only from there.
func (n Nouns) sayAround(s, guardReason string, names ...string) string {
	if guardReason != "" && strings.Contains(s, guardReason) {
		parts := strings.Split(s, guardReason)
		for i := range parts {
			parts[i] = n.sayAround(parts[i], "", names...)
		}
		return strings.Join(parts, n.guard(guardReason))
	}
	// Longest first: a name inside a longer one is kept with it.
	names = slices.DeleteFunc(slices.Clone(names), func(x string) bool { return x == "" })
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	var b strings.Builder
	from := 0
	for i := 0; i < len(s); {
		k := ""
		for _, x := range names {
			if strings.HasPrefix(s[i:], x) && !nameByte(s, i-1) && !nameByte(s, i+len(x)) {
				k = x
				break
			}
		}
		if k == "" {
			i++
			continue
		}
		b.WriteString(n.say(s[from:i]))
		b.WriteString(k)
		i += len(k)
		from = i
	}
	b.WriteString(n.say(s[from:]))
	return b.String()
}

// nameByte reports whether s[i] exists and may be part of a host name.
func nameByte(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i+1 < len(s) && s[i+1] != ' '
}

// say returns s in n's words.
func (n Nouns) say(s string) string { return n.sayWith(s, nil) }

// sayWith returns s in n's words, each replacement passed through esc
// (nil: as it is).
func (n Nouns) sayWith(s string, esc func(string) string) string {
	if n == (Nouns{}) {
		return s
	}
	pl := func(one, many string) string {
		if many != "" {
			return many
		}
		return one + "s"
	}
	return nounWords.ReplaceAllStringFunc(s, func(w string) string {
		r := ""
		switch strings.ToLower(w) {
		case "needs-remediation annotation", "needs-remediation":
			r = n.Unhealthy
		case "health check":
			r = n.HealthCheck
		case "machine":
			r = n.Machine
		case "machines":
			if n.Machine != "" || n.Machines != "" {
				r = pl(n.Machine, n.Machines)
			}
		case "node":
			r = n.Node
		case "nodes":
			if n.Node != "" {
				r = n.Node + "s"
			}
		case "cluster":
			r = n.Group
		}
		if r == "" {
			return w
		}
		if esc != nil {
			return esc(r)
		}
		return r
	})
}

// Decide returns the phased remediation's next step for one Machine. It is
// pure: no I/O, no clock, and o is not modified. Its messages use
// c.Nouns.
func (c Config) Decide(o Observed, now time.Time) Decision {
	d := c.decide(o, now)
	if c.Nouns == (Nouns{}) {
		return d
	}
	// The words are replaced in the messages' own text; the names in them
	// (the storm guard's reason, and the hosts a move names) are kept as
	// they are.
	d.Reason = c.Nouns.sayAround(d.Reason, o.GuardReason, o.State.Host, o.Host.Name)
	if d.State.Message != o.State.Message {
		// A message carried over is already in these words.
		d.State.Message = c.Nouns.sayAround(d.State.Message, o.GuardReason, o.State.Host, o.Host.Name)
	}
	d.UpdateState = !d.State.Equal(o.State)
	return d
}
