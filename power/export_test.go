package power

import "fmt"

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

// CheckPoolInvariants checks what p keeps against itself (for the rapid
// state machines, after every step): per BMC, the sessions it counts
// (opening, open or closing) are never more than MaxSessions plus one
// (one login over the bound at a time: credentials not yet proven, a
// failing system's retry, or a login beside a kept session retired for
// a join); the live ones are counted, not retired, of that BMC, and
// listed by their hosts; the slots held for evicting logins and the
// sessions retired under a join are never negative, nor more than the
// sessions; a login's shared session is live and its own; the hosts
// waiting for a retry turn are that BMC's, missing, and in the Pool;
// those waiting for a held read's turn are that login's and in the Pool.
func CheckPoolInvariants(p *Pool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, ep := range p.eps {
		if ep.sessions > p.cfg.MaxSessions+1 {
			return fmt.Errorf("BMC %s: %d sessions counted, the bound is %d", name, ep.sessions, p.cfg.MaxSessions)
		}
		if len(ep.live) > ep.sessions {
			return fmt.Errorf("BMC %s: %d live sessions, %d counted", name, len(ep.live), ep.sessions)
		}
		if ep.reserved < 0 || ep.outgoing < 0 || ep.outgoing > ep.sessions-len(ep.live) {
			return fmt.Errorf("BMC %s: %d slots held, %d sessions retired under a join, %d counted, %d live", name, ep.reserved, ep.outgoing, ep.sessions, len(ep.live))
		}
		for s := range ep.live {
			if s.retired || s.uncounted || s.outgoing || s.cr.ep != ep {
				return fmt.Errorf("BMC %s: a live session is retired (%v), uncounted (%v), outgoing (%v) or another BMC's (%v)", name, s.retired, s.uncounted, s.outgoing, s.cr.ep != ep)
			}
			for e := range s.entries {
				if e.sess != s {
					return fmt.Errorf("BMC %s: host %s is listed by a session that is not its own", name, e.host)
				}
			}
		}
		for i, t := range ep.retry.h {
			if e := t.e; t.idx != i+1 || t != &e.retry || !e.missing || e.gone || e.cr.ep != ep || p.hosts[e.host] != e {
				return fmt.Errorf("BMC %s: host %s waits for the retry turn at %d (index %d), missing %v, gone %v, of another BMC %v",
					name, e.host, i, t.idx, e.missing, e.gone, e.cr.ep != ep)
			}
		}
		for key, cr := range ep.creds {
			if cr.ep != ep || cr.key != key {
				return fmt.Errorf("BMC %s: login %q filed under the wrong key or BMC", name, key)
			}
			for i, t := range cr.held.h {
				if e := t.e; t.idx != i+1 || t != &e.held || e.gone || e.cr != cr || p.hosts[e.host] != e {
					return fmt.Errorf("BMC %s: host %s waits for a held read's turn of login %q at %d (index %d), gone %v, of another login %v",
						name, e.host, key, i, t.idx, e.gone, e.cr != cr)
				}
			}
			if s := cr.shared; s != nil {
				_, ok := ep.live[s]
				if s.early {
					// Shared before its login's Connect returned: out
					// of the bound's live sessions, counted, joined by
					// that Connect (pool_join.go).
					if ok || s.retired || s.uncounted || s.ctrl == nil || s.joins < 1 || cr.connecting < 1 {
						return fmt.Errorf("BMC %s: a session shared before its login returned is live (%v), retired (%v), uncounted (%v), closed (%v), unjoined (%v), or no login runs (%v)",
							name, ok, s.retired, s.uncounted, s.ctrl == nil, s.joins < 1, cr.connecting < 1)
					}
				} else if !ok && !s.uncounted || s.cr != cr {
					// (A session that opens none at the BMC, basic
					// auth, is never in the bound's live ones.)
					return fmt.Errorf("BMC %s: the shared session of a login is not a live session of that login", name)
				}
			}
		}
	}
	return nil
}
