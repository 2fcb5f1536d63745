package remediation

import (
	"regexp"
	"strings"
	"time"
)

// Nouns are the words of an inventory that is not Cluster API's, for the
// messages remediation writes (State.Message, Decision.Reason, the storm
// guard's arithmetic). An empty field keeps Cluster API's word.
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

// say returns s in n's words.
func (n Nouns) say(s string) string {
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
	d.Reason = c.Nouns.say(d.Reason)
	if d.State.Message != o.State.Message {
		// A message carried over is already in these words.
		d.State.Message = c.Nouns.say(d.State.Message)
	}
	d.UpdateState = !d.State.Equal(o.State)
	return d
}
