package power

// PoolSizes reports what p keeps: hosts, BMC endpoints, logins
// (credentials with their back-off), live sessions, idle sessions and
// parked logins (for tests that memory does not grow with churn).
func PoolSizes(p *Pool) (hosts, endpoints, logins, live, idle, parked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ep := range p.eps {
		logins += len(ep.creds)
		live += len(ep.live)
	}
	return len(p.hosts), len(p.eps), logins, live, p.idle.Len(), len(p.parked)
}

// Sweep runs p's idle sweep once at p's clock (PoolConfig.Now), as its
// janitor does every second: for tests whose clock runs faster than the
// janitor's ticker.
func Sweep(p *Pool) { p.sweep() }
