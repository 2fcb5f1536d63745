// Package power defines how rebootkit talks to the power control of one
// bare-metal server: read its power state, power it on, power it off softly
// (an orderly OS shutdown) or hard (cut the power); and it owns the
// connections to the BMCs that do it (Pool).
//
// The decision functions of the other packages never call a Controller; they
// say which power action to take, and a thin applier (a Reconciler or an
// Executor) calls the Controller and feeds the outcome back into the next
// decision as a [Class]. Implementations: package power/redfish and
// power/ipmi for real BMCs, and package fake for tests and simulations.
//
// # One owner of BMC connections
//
// Every caller that talks to real BMCs (the inventory's fleet, the
// Kubernetes controllers, the examples) gets its Controllers from one
// [Pool]: pool.Controller(host, Target{BMC, Config, Connect}). The Pool
//
//   - opens a host's controller on its first call (Target.Connect, bounded
//     by PoolConfig.ConnectTimeout, one login at a time per BMC) and keeps
//     it for the next calls;
//   - closes it when it has been idle for PoolConfig.IdleTimeout, when the
//     caller says the host is gone (Forget), when the host's Target.Config
//     changes, and on Close;
//   - bounds every State, On and Off call by PoolConfig.CallTimeout (and
//     the caller's own deadline). A controller that does not return within
//     the deadline is given up on: the caller gets a busy error wrapping
//     context.DeadlineExceeded, and the controller is closed once its call
//     returns, counting against its BMC's sessions until then;
//   - backs off per BMC after a failed connect (whatever the reason) and
//     after a call that says the BMC is unreachable or refuses us (no
//     answer, a transport error, a timeout, ErrAuth):
//     PoolConfig.Backoff doubling up to MaxBackoff, and after an
//     authentication failure AuthBackoff (30 s) doubling up to
//     MaxAuthBackoff (30 min), so a BMC with a wrong password sees at most
//     two logins a minute, and fewer as the failures go on. A call during a
//     back-off is not tried: it fails at once with an error matching
//     ErrBackoff and the failure that started it (so errors.Is(err, ErrAuth)
//     still tells the operator the password is wrong). A success, or an
//     answer from the BMC on an open controller (even a refusal with a
//     status, such as a 409), ends the back-off; so does a new
//     Target.Config for the host;
//   - keeps at most PoolConfig.MaxSessions controllers open per BMC (hosts
//     behind one BMC share it), closing the least recently used idle one
//     (and waiting for its logout) before opening another, or waiting for
//     one to become idle.
//
// # The caller's duties
//
//   - Use one Pool per process for all BMCs, and Close it on shutdown (it
//     logs every session out).
//   - Give each BMC one stable Target.BMC name (its address) and each host a
//     stable Target.Config that changes when its configuration (credentials,
//     TLS, system) does; never put secrets in either (the Pool logs Target.BMC and keeps
//     Target.Config for as long as it runs).
//   - Call Forget when a host is deleted.
//   - Treat a busy outcome as "unknown, try again later": a timed-out
//     command may or may not have taken effect.
//
// # Guarantees
//
//   - No call through a Pool's Controller blocks its caller longer than
//     CallTimeout (or the caller's deadline) plus half a second.
//   - Between two logins to a BMC that refused the last one there are at
//     least AuthBackoff, doubling with each refusal until a success or a
//     new Config; between two connection attempts to a BMC after a failed
//     one, at least Backoff, doubling with each failure in a row. A
//     failure never shortens a pause already running.
//   - A BMC never has more than MaxSessions controllers open through the
//     Pool (each holds one session; power/redfish briefly holds two while
//     it replaces an expired one).
//
// # Assumptions
//
//   - Controllers honour their context; one that does not is given up on
//     as above, but its goroutine lives until it returns.
//   - Target.Connect reports a refused login with an error matching
//     ErrAuth (power/redfish and power/ipmi do).
package power
