package remediation

import "fmt"

// Limit is the most machines that may be unhealthy at once for a new
// remediation to start: a count or a percentage of the fleet. The zero
// value is "no limit" (100%).
type Limit struct {
	n       int
	percent bool
	set     bool
}

// MaxCount returns a limit of n machines.
func MaxCount(n int) Limit { return Limit{n: n, set: true} }

// MaxPercent returns a limit of p percent of the fleet, rounded down
// (10% of 15 machines is 1): a percentage never allows more than it says.
func MaxPercent(p int) Limit { return Limit{n: p, percent: true, set: true} }

// Of returns the limit as a count for a fleet of total machines.
func (l Limit) Of(total int) int {
	switch {
	case !l.set:
		return total
	case l.percent:
		return total * l.n / 100
	}
	return l.n
}

// String describes the limit.
func (l Limit) String() string {
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
	Name         string
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
// start now? Unhealthy and remediating machines (and the candidate) count
// as unhealthy; their number must not exceed limit.Of(len(fleet)). At most
// one control-plane machine is remediated at a time. A candidate already
// remediating may always go on. It reads the fleet once and modifies
// nothing.
func MayStart(fleet []FleetMachine, candidate string, limit Limit) (bool, string) {
	unhealthy, cpBusy := 0, false
	var cand *FleetMachine
	for i := range fleet {
		m := &fleet[i]
		if m.Name == candidate {
			cand = m
			unhealthy++
			continue
		}
		if m.Unhealthy || m.Remediating {
			unhealthy++
		}
		if m.ControlPlane && m.Remediating {
			cpBusy = true
		}
	}
	switch {
	case cand == nil:
		return false, fmt.Sprintf("machine %s is not in the fleet", candidate)
	case cand.Remediating:
		return true, "already remediating"
	case cand.ControlPlane && cpBusy:
		return false, "another control-plane machine is being remediated"
	}
	if max := limit.Of(len(fleet)); unhealthy > max {
		return false, fmt.Sprintf("%d of %d machines unhealthy, more than the limit %s (%d)", unhealthy, len(fleet), limit, max)
	}
	return true, fmt.Sprintf("%d of %d machines unhealthy, within the limit %s", unhealthy, len(fleet), limit)
}
