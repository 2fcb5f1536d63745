package remediation

import "fmt"

// MaxUnhealthy is the most machines that may be unhealthy at once for a
// new remediation to start (the storm guard, Reconciler.Limit; Cluster
// API's maxUnhealthy): a count or a percentage of the fleet. The zero
// value is "no limit" (100%). It is not plan.Limit, a count or percentage
// of a rolling-reboot plan's servers (its concurrency, failure budget)
// whose zero value is zero servers.
type MaxUnhealthy struct {
	n       int
	percent bool
	set     bool
}

// Limit is MaxUnhealthy, the storm guard's limit.
//
// Deprecated: use MaxUnhealthy (plan.Limit is another thing).
type Limit = MaxUnhealthy

// MaxCount returns a limit of n machines.
func MaxCount(n int) MaxUnhealthy { return MaxUnhealthy{n: n, set: true} }

// MaxPercent returns a limit of p percent of the fleet, rounded down
// (10% of 15 machines is 1): a percentage never allows more than it says.
func MaxPercent(p int) MaxUnhealthy { return MaxUnhealthy{n: p, percent: true, set: true} }

// Of returns the limit as a count for a fleet of total machines.
func (l MaxUnhealthy) Of(total int) int {
	switch {
	case !l.set:
		return total
	case l.percent:
		return total * l.n / 100
	}
	return l.n
}

// String describes the limit.
func (l MaxUnhealthy) String() string {
	switch {
	case !l.set:
		return "100%"
	case l.percent:
		return fmt.Sprintf("%d%%", l.n)
	}
	return fmt.Sprintf("%d", l.n)
}

// FleetMachine is one machine as the storm guard sees it.
type FleetMachine struct {
	Name string
	// Cluster is the machine's cluster (Cluster API's
	// cluster.x-k8s.io/cluster-name); HealthCheck the health check that
	// watches it (a MachineHealthCheck's name; "" if none). The guard
	// counts per cluster and health check: see MayStart.
	Cluster, HealthCheck string
	// Node is the machine's Node ("" if unknown). Machines of one Node
	// (two remediations of one host, from two health checkers) count as
	// one machine of the fleet, unhealthy if any of them is.
	Node         string
	ControlPlane bool
	// Unhealthy: the health checker marked it (needs remediation).
	Unhealthy bool
	// Remediating: a remediation is in flight (phase between
	// power-off-requested and waiting-for-node).
	Remediating bool
}

// InFlight reports whether a phase is an in-flight remediation.
func InFlight(p Phase) bool { return p >= PhasePowerOffRequested && p <= PhaseWaitingForNode }

// MayStart is the storm guard: may a remediation of machine candidate
// start now? It counts within the candidate's cluster and health check, as
// Cluster API's maxUnhealthy does per MachineHealthCheck: the machines of
// the same Cluster and HealthCheck are its fleet (machines of one Node
// count once); the unhealthy and remediating ones among them (and the
// candidate) count as unhealthy, and
// their number must not exceed limit.Of(size of that fleet). At most one
// control-plane machine of a cluster is remediated at a time. A candidate
// already remediating may always go on. It reads the fleet once and
// modifies nothing.
func MayStart(fleet []FleetMachine, candidate string, limit MaxUnhealthy) (bool, string) {
	var cand *FleetMachine
	for i := range fleet {
		if fleet[i].Name == candidate {
			cand = &fleet[i]
		}
	}
	cpBusy := false
	// One entry per Node (or per machine without one): unhealthy if any
	// machine of it is.
	members := map[string]bool{}
	for i := range fleet {
		m := &fleet[i]
		if cand == nil || m.Cluster != cand.Cluster {
			continue
		}
		if m.ControlPlane && m.Remediating && m != cand {
			cpBusy = true
		}
		if m.HealthCheck != cand.HealthCheck {
			continue
		}
		key := "machine/" + m.Name
		if m.Node != "" {
			key = "node/" + m.Node
		}
		members[key] = members[key] || m == cand || m.Unhealthy || m.Remediating
	}
	unhealthy, size := 0, len(members)
	for _, u := range members {
		if u {
			unhealthy++
		}
	}
	switch {
	case cand == nil:
		return false, fmt.Sprintf(reasonNotInFleet, candidate)
	case cand.Remediating:
		return true, reasonAlready
	case cand.ControlPlane && cpBusy:
		return false, reasonControlPlaneBusy
	}
	if max := limit.Of(size); unhealthy > max {
		return false, fmt.Sprintf(reasonOverLimit, unhealthy, size, scope(cand), limit, max)
	}
	return true, fmt.Sprintf(reasonWithinLimit, unhealthy, size, scope(cand), limit)
}

func scope(m *FleetMachine) string {
	switch {
	case m.Cluster != "" && m.HealthCheck != "":
		return fmt.Sprintf(scopeBoth, m.Cluster, m.HealthCheck)
	case m.Cluster != "":
		return fmt.Sprintf(scopeCluster, m.Cluster)
	case m.HealthCheck != "":
		return fmt.Sprintf(scopeHealthCheck, m.HealthCheck)
	}
	return ""
}
