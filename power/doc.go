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
// All three, and a Pool's Controllers, are also a [Resetter]: a restart
// without a power-off (Redfish ForceRestart, IPMI hard reset), for hosts
// whose power must never go off; a reset is never evidence that a host
// was off.
// power/redfish, power/ipmi and a Pool's Controllers are also a
// [CheckedOner]: a power-on whose caller checks, after the BMC's last
// answer before the command, that it is still wanted. A caller learns
// through [Queued] (WithQueued) whether the BMC accepted a command for
// later (power/redfish: a 202 Accepted) rather than carrying it out, and
// how to read whether that task ended (Queued.TaskEnded: power/redfish
// reads the task monitor the 202 named). power/redfish and a Pool's
// Controllers are also a [TaskReader]: they read a task monitor by the
// address a Queued noted (in another process too, from a record of it),
// as a read, not a command; the answer says whether the task ended or is
// gone (the BMC has no such task).
//
// # One owner of BMC connections
//
// Every caller that talks to real BMCs (the inventory's fleet, the
// Kubernetes controllers, the examples) gets its Controllers from one
// [Pool]: pool.Controller(host, Target{BMC, Config, Login, Connect}). The
// Pool
//
//   - keeps one session per BMC endpoint and login (Target.Login, or
//     Config when it is empty: the credentials and TLS settings): hosts of
//     a chassis whose one Redfish service serves their systems share it
//     (power/redfish makes each host's controller on it without a login,
//     and only when the endpoint, credentials and TLS settings are really
//     the same, and sends each host's requests on the session beside the
//     others', never queued behind a neighbour's hanging one); an adapter
//     that cannot share (power/ipmi) gets a session per host;
//   - opens a session on a host's first call (Target.Connect, bounded by
//     PoolConfig.ConnectTimeout, one login at a time per BMC: the next
//     login goes once the BMC has accepted this one, ConnectInfo.LoggedIn,
//     so that a dead blade's read of its system never holds its
//     neighbours' logins; a login that opens no session,
//     ConnectInfo.NoSession, hands its turn on as soon as it says so, and
//     that host's later ones take none) and keeps it for the next
//     calls. The session is shared from the moment the BMC accepted its
//     login (LoggedIn's controller): the other hosts of the same login
//     join it at once, never waiting for the first host's read of its
//     system (a dead blade's hangs for ConnectTimeout); until that read
//     is over, the session stays its login's, even if every host that
//     joined it is forgotten meanwhile. The Connect or join made for a
//     power command (On, Off, Reset: a fence) says so
//     (ConnectInfo.Command): power/redfish sends its reads beside the
//     session's reads in flight, never queued behind other hosts' (dead
//     blades' reads running to their deadline). A caller that gives up (its context ends) during
//     a login, or while its host joins a shared session, gets a busy error
//     at once; the login or join goes on (bounded by ConnectTimeout), is
//     not counted against the BMC for the caller's giving up, and serves
//     the next call. Logins an
//     adapter makes inside a call (a session expired) go through the same
//     rule and back-off (ConnectInfo.Gate); such a login that runs out of
//     its own time is the BMC's failure, only its caller's cancellation
//     is not. A call waiting for a login of its host that is forgotten
//     meanwhile fails (busy): it never brings the host back;
//   - closes a session when no call used it for PoolConfig.IdleTimeout,
//     when no host uses it any more (Forget), when the hosts' Target
//     changes, and on Close. Each BMC's logouts run in order on their own
//     queue, a bounded number of BMCs' at once, and a login waiting for a
//     BMC's session to be logged out starts that BMC's queue at once: dead
//     BMCs' hanging logouts never hold up another BMC;
//   - bounds every State, On and Off call by PoolConfig.CallTimeout (and
//     the caller's own deadline). A controller that does not return within
//     the deadline is given up on: the caller gets a busy error wrapping
//     context.DeadlineExceeded, and its session is closed once its call
//     returns, counting against its BMC's sessions until then;
//   - backs off LOGINS per BMC and login after a failed one (whatever the
//     reason; a login that outlives ConnectTimeout included; the one
//     exception is a Connect that fails after the BMC accepted its login,
//     with ErrNoSystem or ErrAfterLogin (power/redfish: its system not
//     found, or a request for its own system, its member of the Systems
//     listing or its ActionInfo failing or refused, and, with a session
//     the BMC accepted, a busy, failing or timed-out service root or
//     Systems collection as well: a chassis that builds its collection
//     by asking every blade hangs it while one blade is dead, and that
//     neither backs off nor logs out a login other blades' hosts use;
//     with basic auth such a failure is the login's, unless neither it
//     nor the read of the host's own system was answered): that failure is the host's own,
//     and backs that host alone off, Backoff doubling up to MaxBackoff
//     (AuthBackoff up to MaxAuthBackoff for a refusal of its system
//     by a BMC that answers the credentials, ErrSystemRefused);
//     the session of such a login (ErrAfterLogin, a system not found
//     included: power/redfish hands it over with AfterLoginKeep when
//     ConnectInfo.KeepSession asks) is kept, idle and with no host of its
//     own, as the login's shared session (unless keeping it would take
//     the BMC over MaxSessions: then it is logged out, and never closes a
//     session serving hosts), which the other hosts of the
//     login (and this one, at its next try) join without a login: a
//     service whose systems all fail, or are all missing (blades
//     renumbered), while its collection answers sees one login per
//     IdleTimeout, not one per host and try. Any other
//     failure of a host joining a shared session backs that host alone
//     off too (a refusal of a request for its own system included, if the
//     BMC still takes the session: power/redfish reads the session's own
//     resource first, and a refusal of that read is an expiry, re-logged
//     in once through ConnectInfo.Gate); a refusal of the credentials met while
//     joining counts once against the login (hosts without a session of
//     their own, joiners included, wait out its back-off) and leaves the
//     session to the hosts whose calls still work; a Connect in which the
//     BMC answered no request sent with the credentials, ErrUnanswered:
//     power/redfish with BasicAuth, a refusal held back past
//     ConnectTimeout, counts as an authentication failure of the login,
//     unless a request with them was answered within LoginInterval, when
//     it is the host's own):
//     PoolConfig.Backoff doubling up to MaxBackoff, and after an
//     authentication failure AuthBackoff (30 s) doubling up to
//     MaxAuthBackoff (30 min), so a BMC with a wrong password sees at most
//     two logins a minute with it, and fewer as the failures go on. A call
//     that needs a login during a back-off is not tried: it fails at once
//     with an error matching ErrBackoff and the failure that started it
//     (so errors.Is(err, ErrAuth) still tells the operator the password is
//     wrong). Calls on an open session are always tried, whatever any
//     login's back-off, but for one kind of read (below): one host's
//     wrong password never refuses another host whose credentials differ
//     or whose session is open. A call's failure backs nothing off but
//     one: a call refused with ErrAuth (a new login inside it refused, or
//     credentials sent with it refused) closes the session, so the next
//     call logs in, and backs the credentials' next login off as a
//     refused login does, unless it is already counted (the login inside
//     the call went through the Pool, which counted it, or was not tried:
//     ErrBackoff) or is not theirs: on a session with a token, a login
//     with them succeeded during the call (a re-login inside it, refused
//     again: a refusal of one system). A controller that sends the
//     credentials with every call (power/redfish with BasicAuth) is asked
//     to tell the two apart when other hosts use the same credentials
//     (CallInfo.CheckRefusal, also on Connect and joins), unless they
//     back off after a confirmed refusal (a check that refused them),
//     until that back-off ends: the first refusal after it is checked
//     again (if the password is still wrong, that costs two refused
//     requests, the call's and the check's, and backs them off anew).
//     It checks them on resources of no system's, through
//     CallInfo.Check, and the Pool runs at most one check per
//     credentials at a time (a call refused meanwhile takes, without a
//     new request, the verdict of the one running or of one done since
//     the call began if it refused the credentials or proved nothing; a
//     CredentialsWork verdict only from a check that started after the
//     call's refusal arrived, since one from before may predate a
//     password change), detached from the caller's cancellation (a
//     refusal that arrives after the caller left sends no check and
//     gets VerdictUnknown), bounded by CallTimeout and by Close, which
//     ends running checks and waits for them. Its Verdict: CredentialsWork makes the
//     refusal ErrSystemRefused (not ErrAuth); CredentialsRefused keeps it
//     ErrAuth, and the Pool counts the check as one more refused request
//     towards the credentials' back-off; VerdictUnknown (the check was
//     cut, unanswered, or got no authenticated answer) counts nothing
//     against the credentials and proves nothing for them. This assumes
//     a BMC that protects its SessionService or its Systems collection
//     (power/redfish); one that serves neither resource to anyone, or
//     answers neither, gets VerdictUnknown, and then each host refused
//     backs off alone: after a password rotation the BMC sees up to one
//     refused request per host per back-off, not per credentials, and
//     one more per host per back-off for a power command (below): with
//     the default AuthBackoff (30 s) at most two per host in a minute,
//     reads or fences retried every 5 s alike, where a BMC that protects
//     its check resources sees about two a minute for all the hosts of
//     the credentials. On a
//     refusal of one system (ErrSystemRefused, or VerdictUnknown) the
//     session stays for the hosts that share it, and that host alone
//     backs off, as long as after a refused login: its calls are not
//     tried, on its open session too, until the back-off ends, but for
//     one power command per back-off window (the first fence is tried:
//     it costs at most one more refused request; later ones wait for
//     the window to end; a fence whose caller is already gone takes no
//     such pass, and one that ends with nothing sent and nothing
//     answered, not tried or ErrNotSent, gives it back). A refused join backs the credentials off and leaves the
//     shared session open for the hosts whose calls use it (they tell
//     whether it still works). A controller that sends the credentials with every call
//     (CallAuthenticator: power/redfish with BasicAuth) on a BMC that
//     holds a refused password's requests back unanswered (a password
//     rotated after the hosts connected) would send it with every read:
//     a read (State) of a host whose own last call ran out of time
//     unanswered, when the last call with these credentials did too and
//     none with them was answered within LoginInterval, is held: such
//     reads go one a pause apart (AuthBackoff; doubling for each one
//     left unanswered since, up to MaxAuthBackoff, only if the last
//     failure of these credentials was an authentication failure: else
//     it may be an outage, and the BMC is read again within AuthBackoff
//     once it is back), in turn: the read a pause allows goes to the
//     held host that had its turn longest ago (never first), and a host
//     whose own last call is a whole round old (a pause per host
//     waiting) goes beside it, one such per pause; so the BMC sees at
//     most two such reads a pause, and a healthy host whose one read
//     timed out beside a dead neighbour polled more often is read again
//     once a round has passed since that read (or in turn, if another
//     such host went beside the turn in that pause), not refused for as
//     long as the neighbour is polled. A held
//     read not sent fails at once with an error matching ErrBackoff and
//     ErrNotSent. Any answer to a request with the credentials ends
//     this. No session is
//     closed for it (hosts may be joining it), and a power command is
//     always tried (it may be a healthy host's fence beside a dead
//     neighbour). A successful login ends the
//     back-off of its login; a call's success, or an answer from the BMC,
//     ends it only if the last failure was not an authentication failure
//     (a session outlives a password change: its answers say nothing of
//     the password), unless the controller sends the credentials with
//     every call (CallAuthenticator: power/redfish with BasicAuth);
//   - keeps at most PoolConfig.MaxSessions sessions open per BMC (a
//     login that opens none, ConnectInfo.NoSession: power/redfish with
//     BasicAuth, is not counted, and closes none for its place). A login
//     whose credentials already logged in to the BMC (since the Pool kept
//     them, and the BMC has not refused them since) that finds its BMC at
//     the bound waits for a session to become idle, and then closes the
//     least recently used idle one, at most one every
//     PoolConfig.LoginInterval (1 min) per BMC: live sessions are not
//     evicted faster than that for reads, nor for power commands (below),
//     and other such logins fail as busy (at
//     once, unless a session is being logged out: they wait for it, and
//     join the session of a login of theirs made in its place). The slot
//     an eviction frees is held for the login that made it, and no other
//     login takes it: a caller that gives up waiting leaves the login to
//     go on (bounded by ConnectTimeout), and its session serves the next
//     call, unless the host's Target changed (or the host was forgotten)
//     meanwhile: a login carried on for a caller that left never replaces
//     the host's current Target with the caller's old one. An idle
//     session serving no host (a kept one no host joined) is the one
//     closed first, at any time and not counted against LoginInterval
//     (it is no host's session: a login it makes way for refuses no
//     one; while a host joins it, the login waits for the join rather
//     than close a session serving hosts), then the least recently used
//     idle session; of two last used at the same moment, the one logged
//     in later. Reads and power commands together close at most two such
//     sessions per LoginInterval per BMC: a read's login only the first,
//     a power command's login (On, Off, Reset: a fence) the first or the
//     second, a place reads never take: a fence is not refused for the
//     eviction rate while its neighbours' reads fill the bound with idle
//     sessions, two hosts fenced a moment apart both go out at once, and
//     commands in a loop (a remediation retrying) cost two logins per
//     LoginInterval at most, not one each (a third command that needs a
//     session closed within the interval fails as busy); a command
//     waits for a session being logged out rather than close another. A
//     read's login waiting for a host's join of a kept session waits for
//     it, its caller's time at most, and never goes over the bound for
//     it. A power command's login waits half of its caller's time left
//     at most (and a third of ConnectTimeout), then retires the kept
//     session and logs in one over the bound: the session stays logged in
//     for the join, which only its own ConnectTimeout bounds (another
//     host's login never cuts it short), serves the call that joined, and
//     is logged out once that ends: a hanging join never holds a working
//     host's fence, and a neighbour's read never cancels a working
//     host's. A host whose own last two tries or more failed after
//     the BMC accepted the login (its system missing or failing) closes
//     no session, neither one serving hosts nor another login's kept one:
//     it retries at its own back-off, at most one such host's login per
//     BMC per LoginInterval (whatever the number of such hosts, a slot
//     free or not; the turn goes to the host asking that had it longest
//     ago, and a host keeps its claim for its own pause between tries
//     plus LoginInterval, at most MaxBackoff plus LoginInterval: a
//     repaired blade tried every few minutes is not starved by dead ones
//     polled every second); when its BMC is at the bound it logs in one over the
//     bound, and otherwise
//     fails as busy (at once, unless a session is being logged out; its
//     error wraps the host's last failure, ErrNoSystem for example). If
//     its system still fails, that session is logged out at once; if it
//     works again (a repaired blade), the least recently used idle
//     session is closed, as after a login of credentials not yet proven:
//     busy neighbours never lock a repaired host out (with many such
//     hosts on one BMC, each waits its turn among their retries).
//     A login of credentials not yet proven is tried first, one over the
//     bound (one login at a time per BMC; while the BMC is over the bound
//     already, a login or a logout under way, it waits for that, and
//     closes nothing for its place), and only its success closes
//     the least recently used idle session (as many as needed to keep the
//     slots held for evicting logins free): a wrong password never closes
//     another host's working session;
//   - costs the same per call whatever the number of hosts and BMCs (per
//     BMC state, maps and an idle list; no scan of the hosts), and after
//     Forget keeps nothing of a host (power/redfish keeps a system's
//     reset and press windows, per endpoint (every spelling of one BMC
//     is one endpoint: redfish.Origin) and system for the whole process,
//     until they end under the longest settings any of its Controllers
//     used: a Controller made for it later, through this Pool or another,
//     still sees them).
//
// # The caller's duties
//
//   - Use one Pool per process for all BMCs, and Close it on shutdown (it
//     waits for the calls running, each at most until its deadline, and
//     logs every session out, waiting for the logouts 10 s at most in
//     all, however many BMCs do not answer).
//   - Give each BMC one stable Target.BMC name (its address, in one
//     canonical spelling: redfish.Origin for a Redfish endpoint), each host a
//     stable Target.Config that changes when its configuration (credentials,
//     TLS, system) does, and hosts with the same credentials to one BMC the
//     same Target.Login (never the same one to different credentials:
//     their logins would share a back-off); never put secrets in them (the
//     Pool logs Target.BMC and keeps the others for as long as it runs):
//     [CredentialsKey] makes such an identity from the credentials
//     themselves, without keeping them.
//   - Call Forget when a host is deleted or no longer managed.
//   - Treat a busy outcome as "unknown, try again later": a timed-out
//     command may or may not have taken effect.
//
// # Guarantees
//
//   - Close returns within the longest deadline of the calls running
//     (plus a moment's grace) and 10 s more for the logouts, whatever the
//     number of BMCs.
//   - No call through a Pool's Controller blocks its caller longer than
//     CallTimeout (or the caller's deadline) plus half a second.
//   - Between two logins to a BMC with credentials it refused last there
//     are at least AuthBackoff, doubling with each refusal until a success
//     (a Forget of every host using them does not shorten it); between two
//     logins after a failed one, at least Backoff, doubling with each
//     failure in a row. A failure never shortens a pause already running.
//   - At most one login at a time per BMC (from its start until the BMC
//     accepts it, ConnectInfo.LoggedIn, or it fails), including logins
//     made inside calls by adapters that take the ConnectInfo.Gate
//     (power/redfish).
//   - A BMC never has more than MaxSessions sessions open through the
//     Pool, but for one more (never two) while a login of credentials not
//     yet proven there, or the retry of a host whose system failed, runs
//     and until its outcome has a session logged out (its own, or the
//     least recently used idle one); or while a kept session that a power
//     command's login retired stays logged in for a host's join of it:
//     from that login until the join (at most ConnectTimeout) and then
//     the call the join serves (at most CallTimeout) end, and the logout
//     (at most 10 s).
//
// # Assumptions
//
//   - Controllers honour their context; one that does not is given up on
//     as above, but its goroutine lives until it returns.
//   - Target.Connect reports a refused login with an error matching
//     ErrAuth (power/redfish and power/ipmi do).
//   - A controller's logins inside a call go through ConnectInfo.Gate
//     (power/redfish's and power/ipmi's do); one that logs in on its own
//     is outside the one-at-a-time rule, and its refusals back off only
//     as a call's ErrAuth does (above).
package power
