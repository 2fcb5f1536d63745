// Package redfish implements power.Controller over Redfish, with
// github.com/stmcginnis/gofish.
//
// Connect finds the ComputerSystem once (by ID, or the only one) and keeps
// the client, the session and the system's URI, its Reset target and its
// allowable reset types, so that in steady state reading the power state
// costs one request, a power change two (read, reset) and a power-off that
// does not toggle one (the reset).
//
// What real BMCs do, and what this adapter does about it:
//   - Reset types are chosen from the system's allowable values (inline,
//     or from @Redfish.ActionInfo): soft off = GracefulShutdown, hard off =
//     ForceOff, on = On or ForceOn, PushPowerButton as the last resort (for
//     BMCs that list no Graceful* type: some older firmware; current iLO 5
//     lists GracefulShutdown and GracefulRestart). None fits:
//     power.ErrUnsupported.
//   - PushPowerButton toggles the power, so it is sent only when a fresh
//     read in the same operation says the host is in the opposite state,
//     not within Config.StaleReads of the system's previous reset
//     (the read may echo the state from before it; counted from when its
//     POST returned, the latest an answered reset may have reached the
//     hardware; for a POST that got no HTTP answer, or was answered 202
//     Accepted (queued: the BMC may run it later), which the BMC may
//     still apply, not within Config.LostLanding + SoftTimeout +
//     StaleReads of that return, whatever resets were answered since,
//     unless, for a 202, its task is read ended (Queued.TaskEnded,
//     ReadTask) while it is still the system's latest reset: the answer
//     of that reading then counts as its return, the reset answered
//     (TestReview35ad_QueuedPressLandsLateSecondPressPowersFencedHostOn);
//     the adapter assumes that a BMC applies an unanswered or queued
//     reset, if ever, within LostLanding (default SoftTimeout) of its
//     return, and a press or graceful shutdown it applies then may shut
//     the OS down SoftTimeout later;
//     the reboot package also counts such a press as sent
//     reboot.Config.LostLanding after its return, assumption A5),
//     and, for a power-off,
//     not within Config.SoftTimeout + StaleReads of the system's previous
//     press for a power-off (the OS may still be shutting down from it:
//     an On read may be an echo, and a press would power on a host that
//     is off), or, once an unbroken run of reads (of any Controller for
//     the system) begun StaleReads after that press (answered with
//     success, not 202, or its task read ended) showed Off for Config.OffSettle, within StaleReads of the
//     read that completed the run. Every window is checked against when
//     the read began, not when its answer came (a read begun before a
//     reset returned is inside its window). The windows are kept per
//     endpoint and system in the package, shared by every Controller of
//     the process for the same Endpoint (by its Origin: every spelling of
//     one BMC, such as https://BMC:443/ and https://bmc, or
//     https://proxy/%7Ebmc1 and https://proxy/~bmc1, is one) and
//     system, whatever its login,
//     credentials or power.Target (the Pool's next login after an
//     evicted, retired or abandoned session, or after Pool.Forget and a
//     new Target, keeps them:
//     TestReview35ad_EvictedSessionForgetsPressWindowPoweringFencedHostOn),
//     each measured both with the settings of the Controller that opened
//     it and with those of the one that checks it; a system's record goes
//     once its windows all ended, measured so with the settings of every
//     Controller the process has made (the longest LostLanding +
//     SoftTimeout + StaleReads after the latest window began), at the
//     next operation on the registry, whatever the system (the process
//     keeps nothing of hosts that came and went; no operation scans the
//     records), for up to 65,536 systems with open windows
//     (past that the records that end first are dropped, and every
//     system without a record of its own counts as inside the latest of
//     them until it ends, so no open window is forgotten). They are not
//     shared between processes: a caller that sends power commands to
//     the same system from two processes (a second replica, a CLI beside
//     the controller) must keep them apart as the reboot package does:
//     one leader per host at a time (reboot.Guard), every press recorded
//     (Status.LastPress) before it is sent and counted by the other
//     process as sent when it reads it, and a press or power-off not
//     seen answered counted as sent reboot.Config.LostLanding after its
//     return (assumption A5). A
//     press refused
//     for its credentials was not carried out and does not count; nor
//     does a reset whose POST was never handed to the HTTP client (it
//     waited for the Controller, its request slot or a re-login until its
//     deadline, or its context was done when it would have gone out): it
//     opens no window, and its error matches power.ErrNotSent.
//     A press or a ForceRestart refused 401 (an expired session: nothing
//     applied) is posted again after the re-login only on a read taken
//     after that re-login, the windows above checked again against it:
//     a read of the state a press was for ends the call with success (nothing
//     more is pressed), any other read that forbids it, or none, returns
//     it unsent (power.ErrNotSent), so that no press nor restart goes out
//     on a read older than the re-login
//     (TestReview39_PressResentAfterReloginOnStaleRead).
//     TogglesOff says which power-offs are presses (reboot.Toggler). A BMC
//     that echoes the state from before an out-of-band power change can
//     still fool it.
//     A PowerState that is null, missing, Paused or changing gives a busy
//     error that says why: a toggle sent to a fenced host that is off would
//     power it on.
//   - Allowable values are matched case-insensitively and a malformed
//     concatenation such as "GracefulShutdownGracefulRestart" (a
//     Supermicro firmware) counts for its parts. The reset is posted
//     directly, because gofish's own allowable-value check refuses
//     GracefulShutdown in that case.
//   - A power-off that does not toggle (ForceOff, GracefulShutdown) is
//     sent without reading the state: it cannot power anything on, an Off
//     read may be a stale echo of a host that was powered on a moment ago,
//     and a read that hangs (a blade controller that answers no GET while
//     the BMC still takes resets) would leave the reset none of the
//     caller's deadline. A system that reads On gets no On reset.
//   - A 401 (and a 403 at login, or with BasicAuth to Connect's read of
//     the Systems collection) is power.ErrAuth, of class failed: the
//     BMC refused the credentials (a power.Pool backs off hardest after it).
//     With BasicAuth, a 401 to a request for the host's own system (a
//     call's, or Connect's read of the system or its ActionInfo) is
//     checked, when the context's power.CallInfo asks for it
//     (CheckRefusal: a Pool whose other hosts use the same credentials,
//     unless they back off after a confirmed refusal, until that
//     back-off ends), through CallInfo.Check (a Pool: one check per
//     credentials at a time, ended by its Close; nil: run here, once,
//     bounded by 10 s and ended by the Controller's Close), detached from the call's cancellation (the call
//     waits for it as long as its context allows; a 401 that arrives
//     after the call's context ended sends no check: power.ErrCheckCut
//     below). The check reads the SessionService
//     (/redfish/v1/SessionService), then the Systems collection
//     (/redfish/v1/Systems, no member), following no redirect: both ask
//     no blade. A 401 to either: power.CredentialsRefused, the error is
//     power.ErrAuth (a Pool counts the check's request towards the
//     credentials' back-off). Both answered 200 with a JSON object whose
//     "@odata.id" is the path read (or the SessionService absent, 404, as
//     on sushy-tools, and the Systems collection so answered):
//     power.CredentialsWork, the BMC refuses this system only (a
//     per-blade privilege), and the error matches power.ErrSystemRefused,
//     not power.ErrAuth (power.AfterLogin as well in Connect): a Pool
//     backs that host alone off. Anything else (a login page, a redirect,
//     no answer in time): power.VerdictUnknown, power.ErrAuth as before,
//     but a Pool backs that host alone off and counts nothing against
//     the credentials; if the call's context ended first, the error
//     matches power.ErrCheckCut and the context's error, not
//     power.ErrAuth. The check assumes a BMC that protects its
//     SessionService or its Systems collection (the Redfish
//     specification requires both; the emulator protects both): one
//     that serves both to anyone would
//     answer a refused password with power.CredentialsWork. One that
//     answers neither gets power.VerdictUnknown: after a password
//     rotation, each refused host then backs off alone, and the BMC sees
//     up to one refused request per host per back-off, and one more for a
//     power command a Pool lets through that back-off (two per host a
//     minute with the default 30 s power.PoolConfig.AuthBackoff).
//     Once a session's login was accepted, a failure of a request for the
//     host's own system during Connect (its resource, its member of the
//     Systems listing, its ActionInfo; a 401 included, which then is not
//     power.ErrAuth) is the host's own (power.AfterLogin: a Pool backs
//     that host alone off), and so is a failure of the service root or
//     the Systems collection itself (a busy service, a timeout: a chassis
//     that hangs its collection while a blade is dead), but a 401 to it;
//     the session is then kept for the other hosts (given
//     ConnectInfo.KeepSession). A Connect whose
//     power.ConnectInfo.Command says it serves a power command sends its
//     reads past Config.MaxInFlight, as the command's own. A 401 for
//     a system's own member of a collection the shared session read is
//     no expiry of the session if the BMC still answers the session's own
//     resource (SessionService/Sessions/<id>) on it: a join that meets it
//     logs nobody in; if that read is refused too (a collection served to
//     anyone, an expired session), the join logs in again, once for all,
//     through the Pool's gate. Given ConnectInfo.KeepSession, a login
//     whose system then failed or was not found hands its session over
//     (power.AfterLoginKeep) instead of logging it out: the Pool shares
//     it with the other systems' hosts. Once a session's login was
//     accepted, Connect calls power.ConnectInfo.LoggedIn with itself (the
//     session's controller), before it reads the system: the Pool's next
//     login to the BMC goes meanwhile, and the other hosts of the same
//     login join the session without waiting for that read. With
//     BasicAuth, Connect calls
//     power.ConnectInfo.NoSession first: it opens no session on the BMC,
//     and a Pool counts none against its bound; a direct read of the
//     host's system that runs out of time while the SessionService (read
//     beside it after half the time, or earlier so that it has at least
//     twice as long as the BMC took to answer the login, with the same
//     credentials, in place of the Systems collection a chassis may hang
//     while a blade is dead) answered is the host's own
//     (power.AfterLogin), not the credentials'; if neither answered (a
//     BMC that holds a wrong password's requests back) and the
//     SessionService's read had at least as long as the login's answer
//     took, power.Unanswered: a Pool backs the login off as after a
//     refusal unless the credentials were answered lately; a read that
//     had less (a deadline too short for the BMC) is a plain timeout.
//   - HTTP 400, 405 and 501 on a reset are power.ErrUnsupported; 409 and
//     503 are power.ErrBusy (Dell iDRAC answers 409 to power-on for up to a
//     minute after a power-off: the caller retries); other failures are
//     power.ErrFailed. A 400 or 409 whose re-read shows the target state
//     counts as success.
//   - PoweringOn and PoweringOff read as power.StateTransitioning.
//   - Every operation runs with the caller's context (gofish keeps the
//     context given at connect time; the adapter passes each operation's
//     own), also while it waits for another operation on the same BMC. An
//     expired session is re-established once for every controller sharing
//     it, on the same HTTP transport, through the power.Pool's login gate
//     (power.ConnectInfo.Gate: one login at a time per BMC, and its
//     back-off); that login is not the caller's to cancel (a BMC still
//     answering an abandoned login would get the next one at the same time
//     and keep a session nobody can log out): a caller that gives up
//     leaves it running, bounded, for the next call. The old session is
//     logged out in the background, never holding up the caller. A Connect
//     that fails after logging in logs out again: BMCs have few session
//     slots.
//   - One session serves every system of a service: Connect given an open
//     Controller in power.ConnectInfo.Shared (a power.Pool does that for
//     hosts with the same BMC and login) makes the new system's Controller
//     on its session, without a login, if the endpoint (by its Origin: the
//     session takes every spelling of the BMC), credentials, TLS and proxy
//     settings are the same; otherwise, or if the session refuses the new
//     Controller's requests as off its endpoint, it fails with
//     power.ErrNotShared and the Pool logs in. Closing such a Controller
//     does nothing; closing the one that logged in ends the session. Each
//     Controller sends its reads one at a time, and its power commands'
//     requests one at a time beside them, on its own request path on the
//     session (the session's token and HTTP client, its
//     origin check, body limit and redirect rules), never queued behind
//     another's: gofish's client sends one request at a time for all its
//     copies, so only the login and the logout go through it, and a blade
//     whose reads hang (its join, its reads) never holds up a
//     neighbour's call on the shared session.
//   - Reads wait for a place on their session; power commands wait for
//     none, nor for any read (a read of their own system's included: a
//     monitor's read that waits for a place, or hangs at the BMC, holds
//     up no fence). A session has Config.MaxInFlight places and one extra
//     place. A slow BMC and dead blades (systems whose reads hang while
//     the BMC answers the others) look alike until the BMC answers. A
//     system is in doubt from a read of it that the BMC left unanswered
//     for twice the usual answer time (doubtful), or that the evidence
//     showed to hang (suspect), until one of its reads is answered. The
//     evidence: a read of another system, sent after a read of a system
//     not in doubt (or a probe), is answered within its own overdue time
//     while the first has been unanswered four times as long, its usual
//     overdue time and four times as long as its own system's last
//     answered read took; the first (a GET) is then cancelled and sent
//     again later. The MaxInFlight places are the reads' of systems not
//     in doubt, in line. A doubtful system's read (the highest-ranked
//     first) takes a free one that none of theirs waits for only while
//     the extra place is held by a probe or by a read of a system ranked
//     at least as high, and is cancelled and sent again later when one of
//     theirs waits; a suspect system's read never takes one. The extra
//     place is the systems' in doubt: they rank by the reads they missed
//     since their last answer, fewest first, then by that answer, the
//     latest first; the one ranked first holds it until its read ends,
//     cancelled only for a probe or for a waiting read of a system in
//     doubt that ranks higher and was answered later than the holder's
//     system (one that missed more reads, answered later or not, waits).
//     While every MaxInFlight place is held by an overdue read that no
//     waiting read may cancel and a read of a system not in doubt waits,
//     that read (of those, the one that began waiting last) goes to the
//     BMC as a probe, in the extra place, whose read, once overdue while
//     a probe is wanted, is cancelled and sent again later. A late answer
//     raises the overdue time (not the usual one). A BMC, slow or not, is
//     thus sent at most MaxInFlight + 1 reads at once on open connections
//     (readplace.go; one that goes on working on a cancelled read after
//     its connection closed may still be working on more).
//   - Credentials never leave the endpoint: a redirect to another scheme,
//     host or port, or off the endpoint's own path (onto another BMC behind
//     the same proxy), is not followed, nor any redirect of a request
//     with a body (a login, a reset), so the session token, the basic-auth
//     header and a login's password go nowhere else and a login body is
//     never sent twice; the error wraps ErrRedirect. No request at all is
//     sent off the endpoint, whatever URI the BMC gave (a session's
//     Location, a Reset target, a task monitor, a link): its origin and,
//     on it, the endpoint's own path (a BMC behind a proxy,
//     "https://proxy/bmc1", is not "https://proxy/bmc2"); a path with a
//     "." or ".." segment, a percent-encoded '.', '/' or '\', a ';' (path
//     parameters: "..;" is ".." to a servlet-style proxy) or a '%' left
//     once decoded (a double encoding such as "%252e") is refused
//     outright, not resolved. Such a request fails with an error wrapping
//     ErrOffOrigin, and a Reset target that is not a plain path of the
//     endpoint's ("/…") makes On and Off fail without sending anything.
//     The BMC is reached
//     directly, never through HTTP_PROXY or HTTPS_PROXY from the
//     environment, unless Config.Proxy names a proxy.
//   - A reset answered 202 Accepted succeeds without following the task:
//     the reset was accepted, which is all a power.Controller method
//     promises. The call's power.Queued, if its context carries one
//     (power.WithQueued), says so: the reset may take effect after the
//     call returned, also after its deadline, until its task ended. When
//     the 202 names a task monitor (its Location header, else the
//     @odata.id of its body) that is a Redfish path ("/redfish/v1/…", at
//     most 512 bytes of letters, digits and "/_-.~", no ".." segment) or
//     an absolute URL on the endpoint's own origin, the Queued carries it
//     (Queued.Monitor), and Queued.TaskEnded reads it on the session (one
//     GET, through the same request path and origin rules, at most 64 KiB
//     of its answer read): ended when it answers other than 202 with no
//     TaskState (the reset's own outcome) or with Completed, Exception,
//     Killed or Cancelled; anything else (Running, a refusal, a 404, no
//     answer, a body that is not JSON) is not ended. The caller decides
//     how long to follow it (package kube's Async does).
//   - A service without a SessionService (sushy-tools) is reported with
//     ErrNoSessionService: use BasicAuth.
//   - TLS is verified unless InsecureSkipVerify; RootCAs adds a CA pool.
//     Errors carry the HTTP status and the Redfish message, bounded in size
//     and redacted of every secret the adapter holds (password, username,
//     the basic-auth header value, session tokens), whatever the BMC echoes.
package redfish

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rebootkit/rebootkit/internal/termsafe"
	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

var _ power.Controller = (*Controller)(nil)

// Errors.
var (
	// ErrConfig is wrapped by Connect for invalid configurations.
	ErrConfig = errors.New("redfish: invalid configuration")
	// ErrNoSessionService: the service has no SessionService, so a session
	// cannot be created; set Config.BasicAuth.
	ErrNoSessionService = errors.New("redfish: the service has no SessionService; use basic auth")
)

// Limits on what is read and kept of a BMC's answers.
const (
	// MaxBody bounds every response body read (larger ones are cut).
	MaxBody = 1 << 20
	// MaxMessage bounds the BMC message kept in an error.
	MaxMessage = 512
	// logoutTimeout bounds a logout that nobody waits for.
	logoutTimeout = 10 * time.Second
)

// Config says how to reach one BMC.
type Config struct {
	// Endpoint is the BMC's base URL, e.g. https://10.0.0.5. It must not
	// carry credentials, nor a path with a "." or ".." segment, an empty
	// segment ("//") or a ';' (Origin); a host name's trailing dot is
	// dropped (a stray dot elsewhere is refused); a host name that is not ASCII is converted to its
	// punycode ("xn--…") form as net/http dials it, or refused if the
	// IDNA rules refuse it.
	Endpoint string
	// Username and Password authenticate; with BasicAuth every request
	// carries them, otherwise a session is created and its token used.
	Username, Password string
	BasicAuth          bool
	// SystemID selects the ComputerSystem; empty means the only one.
	SystemID string
	// InsecureSkipVerify disables TLS verification. RootCAs, if set,
	// replaces the system's CA pool.
	InsecureSkipVerify bool
	RootCAs            *x509.CertPool
	// HTTPClient, if set, is used with its transport (TLS settings above
	// and Proxy are ignored; a nil Transport is net/http's default, which
	// honours HTTP_PROXY). Redirects are restricted all the same.
	HTTPClient *http.Client
	// Proxy, if set, is the HTTP proxy to reach the BMC through. Nil: the
	// BMC is reached directly, whatever HTTP_PROXY and HTTPS_PROXY say (a
	// controller's proxy for the internet must not see BMC sessions and
	// passwords).
	Proxy *url.URL
	// StaleReads bounds how long after a reset the BMC may still report
	// the state from before it. PushPowerButton is never sent within
	// StaleReads of the system's previous reset, by any Controller of the
	// process for the same Endpoint and system (counted from when
	// its POST returned: a slow BMC may apply it at any time until then;
	// LostLanding + SoftTimeout + StaleReads for a POST that got no HTTP
	// answer or was answered 202 Accepted, until its task is read ended):
	// the "opposite state" its read shows may be that echo.
	// Default 30 s.
	StaleReads time.Duration
	// LostLanding is this adapter's assumption of how late after its
	// POST returned without an HTTP answer (a timeout, a deadline, a
	// broken connection), or answered 202 Accepted (queued) before its
	// task is read ended, the BMC may still apply a reset. Such a reset
	// may be a press or a graceful shutdown that lands that late and
	// whose OS then takes up to SoftTimeout to shut down, read up to
	// StaleReads late: no PushPowerButton is sent within LostLanding +
	// SoftTimeout + StaleReads of that return, whatever resets were
	// answered since, by this Controller or any other for the same
	// Endpoint and system in this process. Default: SoftTimeout. Keep it
	// and SoftTimeout equal to the reboot.Config the controller decides
	// with (reboot.LostLandingOf gives its LostLanding; both default to
	// their SoftTimeout): the adapter does not read that Config, and a
	// shorter window here is a weaker guard than the reboot package's.
	LostLanding time.Duration
	// Now is the clock StaleReads is measured on. nil: time.Now (whose
	// readings carry the monotonic clock).
	Now func() time.Time
	// SoftTimeout bounds how long the operating system may take to shut
	// down after a press of the power button for a power-off: until then
	// the power may still change because of it. No press for a power-off
	// is sent within SoftTimeout + StaleReads of the system's previous
	// one (by any Controller of the process for the same Endpoint and
	// system), so that the On read it needs cannot be an echo of the
	// state before that shutdown. Default 180 s (reboot.Config's).
	SoftTimeout time.Duration
	// OffSettle is how long before the hardware is off the BMC may
	// already report Off (reboot.Config.OffSettle): a press's shutdown
	// counts as over only once an unbroken run of Off reads, begun
	// StaleReads after the press, is OffSettle long. Zero: the first such
	// read.
	OffSettle time.Duration
	// MaxInFlight bounds the reads in flight at once on one session (the
	// controllers of all the systems sharing a login), so that a monitor
	// reading a chassis' blades together neither opens a connection per
	// blade nor passes the BMC's own limit: a read past it waits for one
	// to end (as long as its caller's context allows). The requests of a
	// power command (On, Off, Reset: their reads and the Reset POST, and
	// a Connect's made for one: power.ConnectInfo.Command) are never held
	// by it: a fence does not queue behind reads. A system is in doubt
	// from a read of it that the BMC left unanswered for twice the
	// session's usual answer time (never raised by a late answer, at
	// least 200 ms) before its caller gave up, or that the evidence
	// below shows to hang, until one of its reads is answered. The
	// places are the reads' of the systems not in doubt, in line; a read
	// of a system in doubt holds one only while none of theirs waits (a
	// read that then waits has it cancelled, and takes its place 10 ms
	// after the cancelled request returned: a BMC notices a closed
	// connection a moment after). One more place is the systems' in
	// doubt: the one that missed the fewest reads since its last answer
	// (then the one answered last) holds it until its read ends,
	// cancelled only for a probe or for a higher-ranked system in doubt
	// answered later than it. So dead blades, once in doubt, hold no
	// place a healthy blade's read waits for (a dead blade polled with
	// deadlines under twice the usual answer time is in doubt only by
	// the evidence), and a system in doubt that answers, slow or not, is
	// answered once it ranks first (after a bounded number of its dead
	// neighbours' reads) if its caller waits for the answer. The
	// evidence: a read of another system, sent after a read, was
	// answered within its own overdue time (four times the session's
	// usual answer time, at least 200 ms; an answer later than that
	// raises it at once to twice that answer's time, at most 2 s) while
	// the first has been unanswered four times as long, its usual
	// overdue time (the same, never raised by a late answer) and four
	// times as long as its own system's last answered read took: the BMC
	// answers, the first read's system hangs (a dead blade); the first
	// read (a GET) is cancelled, its system is in doubt (suspect: its
	// reads take only the extra place), and it is sent again later.
	// While every place is held by an overdue read no read may cancel,
	// the extra place takes a read of a system not in doubt (a probe) to
	// look for that answer; the extra place's read, overdue while a
	// probe is wanted, is cancelled and sent again later. So the BMC,
	// slow or not, fast or slow from the start, is sent at most
	// MaxInFlight + 1 reads at once on open connections; a BMC that goes
	// on working on a cancelled read after its connection closed may be
	// working, besides, on each read cancelled while it still worked on
	// it (no number bounds that: a dead blade's cancelled read there may
	// never end). A 5xx status (a
	// chassis manager's gateway timeout on a dead blade) counts as no
	// answer here: it neither clears a suspicion or a doubt, nor raises
	// the answer time, nor is evidence for an overdue read. The
	// transport made here (not Config.HTTPClient's) keeps twice as many
	// idle connections to the BMC (a read's place may be free before its
	// connection is). Default DefaultMaxInFlight; the first
	// Controller of a session sets it.
	MaxInFlight int
}

// DefaultMaxInFlight is Config.MaxInFlight's default: the requests other
// fleet tools send at once to one BMC.
const DefaultMaxInFlight = 4

// maxInFlight is Config.MaxInFlight or its default.
func (cfg *Config) maxInFlight() int {
	if cfg.MaxInFlight > 0 {
		return cfg.MaxInFlight
	}
	return DefaultMaxInFlight
}

// Controller is a power.Controller for one Redfish ComputerSystem. It is
// safe for concurrent use.
type Controller struct {
	cfg Config
	// origin is Origin(cfg.Endpoint): the BMC's name in the window
	// registry (windows.go).
	origin string

	sess *session // the login; shared with the controllers made on it
	own  bool     // this Controller made the login (Close logs it out)
	// sem is held by the power command under way (On, Off, Reset) and
	// by Close; rsem by the read under way (State, a task monitor's
	// read) and by Close. A command never waits for a read: a read that
	// waits for a read place, or hangs at the BMC, holds rsem, not sem
	// (TestReview35ab_FenceHeldByOwnReadQueuedBehindDeadBlade).
	sem  chan struct{}
	rsem chan struct{}
	// reqs is held by each request a read sends, creqs by each request a
	// power command sends (reqPath): one request at a time of each.
	reqs  chan struct{}
	creqs chan struct{}
	// In doubt (readplace.go): suspect, a read of this system's was shown
	// to hang (a read of another system sent after it was answered much
	// sooner); doubt, a read of its was left unanswered for twice the
	// session's usual answer time; and none was answered since. missed:
	// the reads it missed since its last answer; lastAnswer: when one
	// was last answered (UnixNano); lastTook: how long its last answered
	// read took (ns).
	suspect    atomic.Bool
	doubt      atomic.Bool
	missed     atomic.Int64
	lastAnswer atomic.Int64
	lastTook   atomic.Int64

	systemURI   string
	resetTarget string
	allowed     []string // as the BMC spells them
	// The windows of this system's resets and presses are kept per
	// endpoint and system in the package (windows.go), shared by every
	// Controller for the same system.

	// toggles holds, after each read of the allowable values, bit 1 if a
	// soft and bit 2 if a hard power-off is PushPowerButton (TogglesOff),
	// bit 4 if a power-on is (TogglesOn).
	toggles atomic.Uint32
}

func (c *Controller) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// lostLanding is Config.LostLanding or its default.
func (c *Controller) lostLanding() time.Duration {
	if c.cfg.LostLanding > 0 {
		return c.cfg.LostLanding
	}
	return c.softTimeout()
}

func (c *Controller) softTimeout() time.Duration {
	if c.cfg.SoftTimeout > 0 {
		return c.cfg.SoftTimeout
	}
	return 180 * time.Second
}

// onPrefs are the reset types for a power-on, preferred first.
var onPrefs = []string{"On", "ForceOn", "PushPowerButton"}

// TogglesOn reports whether On is a press of the power button
// (PushPowerButton: the system allows neither On nor ForceOn). It
// implements reboot.OnToggler: the reboot controller then counts a
// power-on whose answer was lost as a press that may land late.
func (c *Controller) TogglesOn() bool { return c.toggles.Load()&4 != 0 }

// offPrefs are the reset types for a power-off in mode m, preferred first.
func offPrefs(m power.Mode) []string {
	if m == power.ModeHard {
		return []string{"ForceOff", "PushPowerButton"}
	}
	return []string{"GracefulShutdown", "PushPowerButton"}
}

// TogglesOff reports whether Off in mode m is a press of the power button
// (PushPowerButton: the system allows no GracefulShutdown, or no
// ForceOff, respectively). It implements reboot.Toggler: the reboot
// controller then sends such a power-off only on an On reading that
// cannot be an echo.
func (c *Controller) TogglesOff(m power.Mode) bool {
	bit := uint32(1)
	if m == power.ModeHard {
		bit = 2
	}
	return c.toggles.Load()&bit != 0
}

func (c *Controller) staleReads() time.Duration {
	if c.cfg.StaleReads > 0 {
		return c.cfg.StaleReads
	}
	return 30 * time.Second
}

// newController makes the Controller of cfg's system on session sess
// (own: it made the login).
func newController(cfg Config, sess *session, own bool) *Controller {
	c := &Controller{cfg: cfg, origin: originOf(cfg.Endpoint), sess: sess, own: own, sem: make(chan struct{}, 1), rsem: make(chan struct{}, 1),
		reqs: make(chan struct{}, 1), creqs: make(chan struct{}, 1)}
	windows.widen(c.lostSpan()) // the registry keeps windows as long as it checks them
	return c
}

// take takes lock l for operation op, or gives up when ctx is done: a
// BMC that never answers must not block later callers past their
// deadlines.
func take(ctx context.Context, l chan struct{}, op string) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "another operation on this BMC is under way", Err: ctx.Err()}
	}
}

// lock takes the Controller for one power command (or Close), giving up
// when ctx is done: the error then matches power.ErrNotSent (nothing was
// sent).
func (c *Controller) lock(ctx context.Context, op string) error {
	if err := take(ctx, c.sem, op); err != nil {
		return notSentYet(err)
	}
	return nil
}

func (c *Controller) unlock() { <-c.sem }

// lockRead takes the Controller for one read (State, a task monitor's),
// giving up when ctx is done. It waits for no power command, nor a power
// command for it.
func (c *Controller) lockRead(ctx context.Context, op string) error {
	return take(ctx, c.rsem, op)
}

func (c *Controller) unlockRead() { <-c.rsem }

// notSentYet is err (a *power.Error of a wait for the Controller) saying
// that nothing was sent, and matching power.ErrNotSent.
func notSentYet(err error) error {
	var pe *power.Error
	if !errors.As(err, &pe) {
		return err
	}
	cp := *pe
	cp.Message += ": not sent"
	cp.Err = fmt.Errorf("%w: %w", power.ErrNotSent, pe.Err)
	return &cp
}

// Connect opens a session (or sets up basic auth), finds the system and
// reads its reset action.
func Connect(ctx context.Context, cfg Config) (*Controller, error) {
	if _, err := Origin(cfg.Endpoint); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: endpoint must be an http(s) URL", ErrConfig)
	}
	ci := power.ConnectInfoFrom(ctx)
	if ci.Command {
		ctx = asCommand(ctx) // a fence's reads are not held behind other hosts' reads
	}
	if ci.Shared != nil {
		return share(ctx, cfg, ci.Shared)
	}
	if cfg.BasicAuth && ci.NoSession != nil {
		ci.NoSession() // every request carries the credentials: no session at the BMC
	}
	c := newController(cfg, nil, true)
	c.sess = newSession(c.httpClient(u), ci.Gate, newReadPlaces(cfg.maxInFlight()))
	if err := c.connect(ctx, ci); err != nil {
		return nil, err
	}
	return c, nil
}

// logout ends a session without holding anyone up: bounded by
// logoutTimeout, detached from the caller's cancellation.
//
// It deletes the session's resource as gofish's Logout does, but never
// clears the client's token: other controllers made on the session may
// have requests in flight that read it (Logout's write would race with
// them), and a request sent with the deleted token is refused with a 401
// like one sent without it.
func logout(ctx context.Context, cl *gofish.APIClient) {
	if cl == nil {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	endSession(lctx, cl)
}

// endSession deletes session cl's resource at the BMC, bounded by ctx,
// and closes its idle connections (see logout).
func endSession(ctx context.Context, cl *gofish.APIClient) {
	lcl := cl.WithContext(ctx) // a copy: its context is its own
	if s, err := lcl.GetSession(); err == nil && lcl.Service != nil {
		_ = lcl.Service.DeleteSession(s.ID) // best effort: the BMC ends it at its timeout otherwise
	}
	if lcl.HTTPClient != nil {
		lcl.HTTPClient.CloseIdleConnections()
	}
}

// connect logs in (through the Pool's gate, if any) and discovers the
// system (before publication). ci.KeepSession: a failure of the host's
// own system (power.ErrAfterLogin, a system not found included) hands the
// session over in the error (power.AfterLoginKeep), to be shared by the
// other systems' hosts. ci.LoggedIn is called once a session's login was
// accepted, before the system is read (the BMC's next login may go).
func (c *Controller) connect(ctx context.Context, ci power.ConnectInfo) error {
	keep := ci.KeepSession
	client, err := c.sess.login(ctx, c, false)
	if err != nil {
		return err
	}
	c.sess.set(client)
	if ci.LoggedIn != nil && !c.cfg.BasicAuth {
		ci.LoggedIn(c) // c's session serves the other systems' hosts from now on
	}
	if err := c.discover(ctx); err != nil {
		if keep && !c.cfg.BasicAuth && errors.Is(err, power.ErrAfterLogin) {
			// The login is good (the BMC accepted it) and the system
			// failed or is not listed (this host's own failure: it
			// backs off alone): the session serves the other systems'
			// hosts, whose systems may be missing or fail as well (a
			// chassis whose blades were renumbered), without a login
			// each. The caller keeps it, and closes it. (This
			// Controller found no system: it only serves as the shared
			// session.)
			return power.AfterLoginKeep(err, c)
		}
		// Logged in, but unusable: free the BMC's session slot.
		logout(ctx, client)
		c.sess.set(nil)
		return err // discover marks the host's own system's failures (systemsOwn)
	}
	return nil
}

// Close logs the session out (waiting at most 10 s for the BMC). The
// controllers made on this one's session (Connect with a shared session)
// stop working; Close of one of those does nothing.
func (c *Controller) Close() error { return c.CloseContext(context.Background()) }

// CloseContext is Close, giving up when ctx is done.
func (c *Controller) CloseContext(ctx context.Context) error {
	// A system whose windows all ended (with the longest settings of the
	// process's Controllers: the next Controller may check them with its
	// own) leaves nothing behind; one whose windows are open keeps them
	// (windows.go, TestReview35ae_CloseDropsWindowTheNextControllerStillNeeds).
	windows.dropEnded(c.windowKey(), c.now())
	if !c.own {
		return nil
	}
	// The checks run alone end now: nothing of theirs is sent once Close
	// returns (TestReview35ar_CheckWithoutPoolOutlivesClose).
	c.sess.stopChecks()
	if err := take(ctx, c.sem, "close"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.lockRead(ctx, "close"); err != nil {
		return err
	}
	defer c.unlockRead()
	if cl := c.sess.take(); cl != nil {
		// Bounded by ctx as well: a caller giving up ends the wait.
		lctx, cancel := context.WithTimeout(ctx, logoutTimeout)
		defer cancel()
		endSession(lctx, cl)
	}
	return nil
}

// SharesSession reports true: the controllers of other systems of this
// BMC, with the same endpoint, credentials and TLS settings, can be made
// on this one's session (power.SessionSharer).
func (c *Controller) SharesSession() bool { return true }

// AuthenticatesCalls reports whether every request carries the
// credentials (Config.BasicAuth: no session), so that an answered call
// proves them (power.CallAuthenticator).
func (c *Controller) AuthenticatesCalls() bool { return c.cfg.BasicAuth }

// State reads the system's PowerState (one request). A PowerState that is
// null, missing, Paused or anything else unknown is power.StateUnknown with
// no error: the BMC answered, but nothing may be decided on it.
func (c *Controller) State(ctx context.Context) (power.State, error) {
	if err := c.lockRead(ctx, "state"); err != nil {
		return power.StateUnknown, err
	}
	defer c.unlockRead()
	s, err := c.readState(ctx)
	if err != nil {
		return power.StateUnknown, err
	}
	return s, nil
}

func (c *Controller) readState(ctx context.Context) (power.State, error) {
	sent := c.now()
	var sys *schemas.ComputerSystem
	err := c.withSession(ctx, func(cl *reqPath) error {
		var err error
		sys, err = schemas.GetComputerSystem(cl, c.systemURI)
		return err
	})
	if err != nil {
		return power.StateUnknown, c.classify("state", err)
	}
	state := power.StateUnknown
	switch strings.ToLower(string(sys.PowerState)) {
	case "off":
		state = power.StateOff
	case "poweringon", "poweringoff":
		state = power.StateTransitioning
	case "on":
		state = power.StateOn
	}
	if state != power.StateUnknown {
		// Taken StaleReads after a press that was answered, an unbroken
		// run of Off reads OffSettle long shows the hardware off after
		// it: its shutdown is over (the run is the system's, whichever
		// Controller read it; windows.go).
		windows.observe(c.windowKey(), state == power.StateOff, sent, c.now(), c.staleReads(), c.cfg.OffSettle)
	}
	return state, nil
}

// notSent is the error of a command not sent because the state it needs
// could not be read: of the read's class, matching power.ErrNotSent (it
// certainly changed nothing) and whatever the read's error matches.
func notSent(op string, err error) error {
	pe := &power.Error{Op: op, Class: power.Classify(err), Message: "not sent: the power state could not be read"}
	var re *power.Error
	if errors.As(err, &re) {
		pe.Class, pe.Status = re.Class, re.Status
	}
	pe.Err = fmt.Errorf("%w: %w", power.ErrNotSent, err)
	return pe
}

// withSession runs f with c's request path on the session, bound to ctx,
// and once more after re-establishing the session if the BMC answered
// 401; with BasicAuth, a 401 is checked against the credentials once
// instead (refusedHere).
func (c *Controller) withSession(ctx context.Context, f func(*reqPath) error) error {
	cl := c.sess.current()
	if cl == nil {
		return &power.Error{Op: "request", Class: power.ClassFailed, Message: "controller closed"}
	}
	err := f(c.on(ctx, cl))
	if c.cfg.BasicAuth {
		return c.refusedHere(ctx, cl, err)
	}
	var re *schemas.Error
	if errors.As(err, &re) && re.HTTPReturnedStatusCode == http.StatusUnauthorized && !c.cfg.BasicAuth && ctx.Err() == nil {
		fresh, lerr := c.sess.relogin(ctx, c, cl)
		if lerr != nil {
			return lerr
		}
		err = f(c.on(ctx, fresh))
	}
	return err
}

var _ power.CheckedOner = (*Controller)(nil)

// classify turns a gofish or transport error into a *power.Error whose
// every rendering is free of the adapter's secrets and bounded in size. The
// gofish error itself (whose Error() is the raw body) is never wrapped; only
// the context's errors are, for errors.Is.
func (c *Controller) classify(op string, err error) *power.Error {
	var pe *power.Error
	if errors.As(err, &pe) {
		return pe
	}
	if e, ok := c.classifyRefused(op, err); ok {
		return e
	}
	var ce *schemas.CollectionError
	if errors.As(err, &ce) && ce != nil {
		// Listing wraps each member's failure: report the first with its
		// status (a 401 or a 503 must not look like nothing).
		keys := make([]string, 0, len(ce.Failures))
		for k := range ce.Failures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if f := ce.Failures[k]; f != nil {
				return c.classify(op, f)
			}
		}
	}
	var re *schemas.Error
	if errors.As(err, &re) {
		msg := re.Message
		if len(re.ExtendedInfos) > 0 && re.ExtendedInfos[0].Message != "" {
			msg = re.ExtendedInfos[0].Message
		}
		class := power.ClassFailed
		switch re.HTTPReturnedStatusCode {
		case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			class = power.ClassUnsupported
		case http.StatusConflict, http.StatusServiceUnavailable:
			class = power.ClassBusy
		}
		var cause error
		if re.HTTPReturnedStatusCode == http.StatusUnauthorized || op == "connect" && re.HTTPReturnedStatusCode == http.StatusForbidden {
			// The BMC refused the credentials (or, at login, the account).
			cause = power.ErrAuth
		}
		return &power.Error{Op: op, Class: class, Status: re.HTTPReturnedStatusCode, Message: c.redact(msg), Err: cause}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	case errors.Is(err, context.Canceled):
		return &power.Error{Op: op, Class: power.ClassFailed, Message: "canceled", Err: context.Canceled}
	case errors.Is(err, ErrRedirect):
		return &power.Error{Op: op, Class: power.ClassFailed, Message: c.redact(err.Error()), Err: ErrRedirect}
	}
	// Transport errors name the URL (Connect refuses endpoints with
	// userinfo); their text is redacted all the same, and not wrapped.
	return &power.Error{Op: op, Class: power.ClassFailed, Message: c.redact(err.Error())}
}

// redact removes every secret the adapter holds from text a BMC sent (or
// echoed), in the encodings an echo may use, then its control characters
// (termsafe.Clean), and bounds its length.
func (c *Controller) redact(s string) string {
	var secrets []string
	add := func(v string) {
		if v != "" {
			secrets = append(secrets, v)
		}
	}
	u, p := c.cfg.Username, c.cfg.Password
	if p != "" {
		basic := base64.StdEncoding.EncodeToString([]byte(u + ":" + p))
		add(basic)
		add(base64.RawStdEncoding.EncodeToString([]byte(u + ":" + p)))
		add(base64.URLEncoding.EncodeToString([]byte(u + ":" + p)))
		add(p)
		if q, err := json.Marshal(p); err == nil {
			add(strings.Trim(string(q), `"`))
		}
		add(url.QueryEscape(p))
		add(url.PathEscape(p))
		if len(u) >= 3 {
			add(u) // paired with the password in logins and basic auth
		}
	}
	if cl := c.sess.current(); cl != nil {
		if sess, err := cl.GetSession(); err == nil {
			add(sess.Token)
		}
	}
	// Longest first, so that a secret containing another goes whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	// A peer's control characters (terminal escapes, line breaks, bidi
	// overrides) never reach an error: operators read them on terminals.
	s = termsafe.Clean(s)
	if len(s) > MaxMessage {
		s = s[:MaxMessage] + "…(truncated)"
	}
	return strings.ToValidUTF8(s, "?")
}

var _ power.Resetter = (*Controller)(nil)
