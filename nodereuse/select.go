package nodereuse

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// ProvisioningState is a host's provisioning state as the bare-metal
// operator reports it. Only StateAvailable hosts can be picked.
type ProvisioningState string

// Provisioning states that matter here; others are passed through as is.
const (
	StateAvailable      ProvisioningState = "available"
	StateProvisioning   ProvisioningState = "provisioning"
	StateProvisioned    ProvisioningState = "provisioned"
	StateDeprovisioning ProvisioningState = "deprovisioning"
	StateRegistering    ProvisioningState = "registering"
	StateInspecting     ProvisioningState = "inspecting"
)

// Host is what selection needs to know of a bare-metal host.
type Host struct {
	// Name identifies the host.
	Name string
	// Version is the store's version, for optimistic concurrency.
	Version string
	// Labels are the host's labels; Label marks reuse.
	Labels map[string]string
	// State is the provisioning state.
	State ProvisioningState
	// ConsumerRef names the machine that claimed the host, "" if none.
	ConsumerRef string
	// Deleting is true once deletion was requested.
	Deleting bool
	// Error is true while the host reports an error.
	Error bool
	// Paused is true while the host is paused (e.g. during a move).
	Paused bool
	// Unhealthy is true when a health check marked the host unhealthy.
	Unhealthy bool
	// FailureDomain is the host's failure domain, "" if none.
	FailureDomain string
}

// Operator is a label selector requirement's operator.
type Operator string

// Operators of label selector requirements (Kubernetes semantics).
const (
	OpIn           Operator = "In"
	OpNotIn        Operator = "NotIn"
	OpExists       Operator = "Exists"
	OpDoesNotExist Operator = "DoesNotExist"
)

// Requirement is one match expression of a Selector.
type Requirement struct {
	Key      string
	Operator Operator
	Values   []string
}

// Selector is a Kubernetes label selector. The zero value matches every
// host.
type Selector struct {
	MatchLabels      map[string]string
	MatchExpressions []Requirement
}

// Matches reports whether labels satisfy every part of s. A requirement
// with an unknown operator matches nothing.
func (s Selector) Matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := labels[r.Key]
		switch r.Operator {
		case OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case OpExists:
			if !ok {
				return false
			}
		case OpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Request asks for hosts for machines of one pool.
type Request struct {
	// Pool is the machines' pool; its label value finds reserved hosts.
	Pool Pool
	// Selector is the machine template's host selector.
	Selector Selector
	// FailureDomain is preferred (not required) when set.
	FailureDomain string
	// Claimed names hosts already claimed in this pass (by other machines);
	// they are never picked. Select does not modify it.
	Claimed map[string]bool
	// Seed makes the random choice among equal hosts reproducible.
	Seed uint64
	// RequeueAfter is the delay of a requeue outcome; default 30 s.
	RequeueAfter time.Duration
}

// Outcome is the kind of a Selection. The zero value is OutcomeNoHost.
type Outcome int

const (
	// OutcomeNoHost: no host fits; the machine waits for hosts to appear.
	OutcomeNoHost Outcome = iota
	// OutcomePick: claim Selection.Host.
	OutcomePick
	// OutcomeRequeue: hosts reserved for this pool exist but none is
	// available yet; look again after Selection.RequeueAfter. Never fall
	// back to another host in this case.
	OutcomeRequeue
)

// String returns "no-host", "pick" or "requeue".
func (o Outcome) String() string {
	switch o {
	case OutcomePick:
		return "pick"
	case OutcomeRequeue:
		return "requeue"
	}
	return "no-host"
}

// Selection is the answer for one machine. For OutcomePick the caller
// claims Host (sets its consumer reference) and, if RemoveLabel, removes
// Label from it in the same write, with optimistic concurrency.
type Selection struct {
	Outcome      Outcome
	Host         string
	RemoveLabel  bool
	RequeueAfter time.Duration
	Reason       string
}

// tier orders candidates: lower is better.
const (
	tierReservedFD = iota // reserved for the pool, in the failure domain
	tierReserved          // reserved for the pool
	tierFreeFD            // unlabelled, in the failure domain
	tierFree              // unlabelled
	tiers
)

// classify returns the host's tier, or -1 if it cannot be picked, and
// whether it is a reserved host that is not available yet (waiting).
func classify(h *Host, req *Request, want string) (tier int, waiting bool) {
	if h.Deleting || req.Claimed[h.Name] {
		return -1, false
	}
	label, labelled := h.Labels[Label]
	if labelled && label != want {
		return -1, false // reserved for another pool: never
	}
	if labelled && h.ConsumerRef != "" && h.State != StateDeprovisioning {
		return -1, false // already taken; its label is stale
	}
	if !req.Selector.Matches(h.Labels) {
		return -1, false
	}
	usable := h.State == StateAvailable && h.ConsumerRef == "" && !h.Error && !h.Paused && !h.Unhealthy
	fd := req.FailureDomain != "" && h.FailureDomain == req.FailureDomain
	switch {
	case labelled && usable && fd:
		return tierReservedFD, false
	case labelled && usable:
		return tierReserved, false
	case labelled:
		return -1, true // reserved for us, not available yet
	case usable && fd:
		return tierFreeFD, false
	case usable:
		return tierFree, false
	}
	return -1, false
}

// Select picks a host for one machine of req.Pool. It reads hosts in one
// pass, modifies nothing, and returns the same answer for the same hosts
// (in any order) and seed.
//
// Rules, in order: a host labelled for this pool and usable (Available,
// unclaimed, not deleting, in error, paused or unhealthy, matching the
// selector) is picked, preferring the failure domain, and its label is
// removed in the same claim. Labelled hosts win whether or not reuse is
// enabled now. If hosts labelled for this pool exist but none is usable,
// the answer is requeue. Otherwise an unlabelled usable host is picked at
// random (by seed), preferring the failure domain. A host labelled for
// another pool is never picked.
func Select(hosts []Host, req Request) (Selection, error) {
	want, err := req.Pool.LabelValue()
	if err != nil {
		return Selection{}, err
	}
	best, bestKey, choice, waiting := tiers, uint64(0), -1, 0
	for i := range hosts {
		t, w := classify(&hosts[i], &req, want)
		if w {
			waiting++
		}
		if t < 0 || t > best {
			continue
		}
		k := key(req.Seed, hosts[i].Name)
		if t < best || k < bestKey || k == bestKey && hosts[i].Name < hosts[choice].Name {
			best, bestKey, choice = t, k, i
		}
	}
	return decide(req, best, waiting, func() string { return hosts[choice].Name }), nil
}

func decide(req Request, tier, waiting int, name func() string) Selection {
	switch {
	case tier <= tierReserved:
		return Selection{Outcome: OutcomePick, Host: name(), RemoveLabel: true,
			Reason: "host reserved for " + req.Pool.String()}
	case waiting > 0:
		d := req.RequeueAfter
		if d <= 0 {
			d = 30 * time.Second
		}
		return Selection{Outcome: OutcomeRequeue, RequeueAfter: d,
			Reason: fmt.Sprintf("%d host(s) reserved for %s, none available yet", waiting, req.Pool)}
	case tier < tiers:
		return Selection{Outcome: OutcomePick, Host: name(), Reason: "no host reserved for " + req.Pool.String() + ": random free host"}
	}
	return Selection{Reason: "no usable host"}
}

// SelectN picks hosts for n machines of the same request in one pass,
// never handing out a host twice: the first machines get the reserved
// hosts, and once those run out the rest requeue (if reserved hosts are
// still on their way) or fall back to free hosts. It costs O(h log h) for h
// hosts, whatever n is.
func SelectN(hosts []Host, req Request, n int) ([]Selection, error) {
	want, err := req.Pool.LabelValue()
	if err != nil {
		return nil, err
	}
	type cand struct {
		key  uint64
		name string
	}
	var byTier [tiers][]cand
	waiting := 0
	for i := range hosts {
		t, w := classify(&hosts[i], &req, want)
		if w {
			waiting++
		}
		if t >= 0 {
			byTier[t] = append(byTier[t], cand{key(req.Seed, hosts[i].Name), hosts[i].Name})
		}
	}
	for t := range byTier {
		c := byTier[t]
		sort.Slice(c, func(i, j int) bool { return c[i].key < c[j].key || c[i].key == c[j].key && c[i].name < c[j].name })
	}
	out := make([]Selection, 0, n)
	t := 0
	for len(out) < n {
		for t < tiers && len(byTier[t]) == 0 {
			t++
		}
		var name string
		if t < tiers {
			name = byTier[t][0].name
		}
		s := decide(req, t, waiting, func() string { return name })
		if s.Outcome == OutcomePick {
			byTier[t] = byTier[t][1:]
		}
		out = append(out, s)
	}
	return out, nil
}

// key mixes the seed and the host name (FNV-1a, then a final avalanche),
// so that the choice is random per seed but independent of list order.
func key(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037) ^ seed
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
