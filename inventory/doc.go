// Package inventory describes the servers a rolling reboot may touch (an
// inventory file in YAML) and runs reboot jobs on them: Fleet is the
// plan.Fleet that cmd/rebootctl's executor uses.
//
// # The inventory
//
// Per server: its UUID and hostname, core and headnode flags, the platform
// it runs now, its BMC (a Redfish base URL or an IPMI address, a username,
// and where the password comes from: an environment variable or a file;
// never the inventory), a health check (a TCP port, an HTTP URL and the
// status it must answer, or a command) that stands for "its services are
// up", optional drain and undrain commands, and labels (rack, zone: its
// failure domains). Defaults apply to every server. The plan section
// (PlanPolicy) gives new plans maintenance windows, a canary ramp, limits
// per failure domain and blocking conditions. Unknown keys are errors, so that a misspelt key never drops a
// check. Parse and Load check everything they can without the network.
//
// # Jobs
//
// A reboot job (Fleet.CreateJob, idempotent by job UUID; refused with
// ErrServerBusy while the server has another live job) is a pure decision
// (the job's state machine, a function of what was observed and the time)
// and a thin applier. It drains the server, writes its own
// keyed reboot request (the annotation key carries the job's UUID) for a
// soft power cycle (falling back to hard after reboot.Config.SoftTimeout),
// releases it once the server is fenced on evidence for this very
// request (an Off reading the reboot controller counts as covering the
// request it saw, reboot.Status.Covers: never the evidence of an earlier
// reboot, whatever the wall clock did between them), and counts the power cycle finished
// (JobObs.Finished, the plan's FINISHED) only when the server reads on
// again, with a reading that cannot be such an echo either; then it waits
// for the health check and undrains. Every end of a job undoes its drain
// (a failed or timed-out drain, a health check that never passes, a
// cancel at any step; a cancel or an abandon interrupts a running drain
// command at once): only an undrain that keeps failing until the
// services timeout leaves the server drained, and the job's error says so. Every state change is written to the
// fleet state file (bbolt) before the step it starts; the reboot request's
// value is chosen before it is written. A Fleet opened again (an executor
// restarted) resumes every job where it was, without a second power cycle.
// It refuses to open (ErrMissingServer, naming each) while a server with a
// live job or a power cycle that has not settled is missing from the
// inventory: only its BMC can power it on.
//
// The power bookkeeping is the fleet's, not the job's: once a job has
// written its request, the fleet reconciles the server (one goroutine per
// server, through the reboot package's Reconciler) until it reads on with
// no request left and no reboot pending, whatever happens to the job or
// its plan, and across restarts. A power-on that fails (busy, a timeout,
// an executor killed between the status write and the call) is retried.
//
// A power-off is sent only while the server's live job is in its reboot
// step, not cancelled, and (Options.PlanCheck) its plan still runs it; the
// fleet writes that a power-off may have been accepted before sending it,
// and clears that only on an answer that proves it was not (a refused
// password, busy, unsupported, an unreachable BMC). A job cancelled
// (CancelJob), timed out (Options.JobTimeout), or dropped by its plan
// (Sync) before that withdraws its request and drops the pending reboot:
// nothing powers the server off, and the job ends at once, without
// waiting for a power reading (a BMC that never answers holds nothing but
// its own server). After it, the power cycle completes (the server is
// brought back on), then the job ends; if the power cycle has not
// completed Options.JobTimeout after the request (a BMC that stopped
// answering mid-cycle), the job gives up on its power cycle (it releases
// its request, undrains, and ends failed saying the server may be off),
// and from that decision on, not only once the job has ended, the fleet
// keeps reconciling the server, never powering it off again (the plan may
// start another reboot in its slot): it only powers it on if it reads off. A power-off the BMC accepted (or may have) before
// the job ended may still take effect later, up to Options.ShutdownMax
// after it was sent (a slow OS shutdown; one that takes longer must never
// end), so the server counts as down until a health check begun
// ShutdownMax after the fleet's last power-off to it (or after the
// executor started, for one an earlier run sent) passes; the fleet drops
// what is left of the power cycle once a power reading taken StaleReads
// past that instant says on (nothing of it can take effect any more), and
// powers the server on if the late power-off lands first. The operator can give up on a server
// (Fleet.Abandon; rebootctl plan abandon): the fleet never powers it on or
// off again, its job ends failed (undrained), a job of the same plan asked
// for later is recorded failed at once (the plan moves on), and so is
// one of that plan whose reboot is in its job step but which this file
// does not have (it was in the file of an executor taken over from), never
// taken for a finished job the fleet collected; Status shows
// its last known phase, and it counts as down while its health check
// fails and, if it was abandoned mid power cycle, until a health check
// begun ShutdownMax after the fleet's last power-off to it passes (an
// abandon stops the fleet's follow-up, not a power-off already sent); a
// job of another plan takes it back only after that cut-off (refused,
// ErrServerBusy, until then). Taking back a server abandoned mid power
// cycle takes back that cycle too, whatever becomes of the new job: the
// fleet powers it on if it reads off (never off: no job of it powers) and
// drops the cycle once it reads on.
//
// The server the executor runs on (Options.Self) is never powered off
// through its BMC: nothing would power it on again. This is checked
// before anything else, even before completing a power cycle whose
// power-off may have been accepted: a reboot that began through the BMC
// before the executor knew it ran there is withdrawn and done through the
// OS instead, and what is left of one whose job had already ended is
// dropped (the executor runs there, so it is on). Inventory.Identify finds the server by machine ID first
// (Server.MachineID against Machine.MachineID: equal is it, different is
// not), then by hostname (case and domain aside) or by address; servers it cannot tell apart from this
// machine (Options.MaybeSelf) are never powered off and their jobs are
// refused (ErrMaybeSelf) until the operator names the executor's server.
// Such a server is not taken for the executor's own: a job of it already
// in its reboot step withdraws its request (cancelled) if no power-off of
// it may have been accepted, and otherwise keeps its power cycle, the
// fleet only powering the server on (it may be off).
// The executor's own job reboots it with the server's reboot command (the
// inventory's reboot key) only when no other power cycle of the fleet is
// unsettled (self last, alone; meanwhile no other server is powered off,
// held from before "sent" is recorded), only if (Options.PlanCheck) its
// plan still runs it and it was not cancelled before the command was sent
// (then it undoes its drain and ends cancelled, the command never run),
// after recording the boot ID (Options.BootID) and "sent on this boot":
// the command runs once per boot, never again while the boot ID stays
// the same or cannot be read, and the reboot counts done when the
// executor, started again on the new boot, reads another boot ID. A
// failed run fails the job only if the same boot ID is still read two
// minutes after the command returned or was killed; the job also fails
// once the same boot ID is read past the command's cut-off (below: it did
// not reboot, or the executor was killed before running it and restarted
// on the same boot), so nothing of it holds the fleet for the job
// timeout. The command is recorded on the server (before it runs, and
// again when it returns) as a power-off that may still land, whatever it
// answered (a delayed shutdown -r +1 returns at once; one that failed or
// timed out may have been accepted) and whatever its job or the operator
// decide since (the job failing, an abandon): while it runs, and until
// another boot ID is read on the server, nothing else is powered off for
// ShutdownMax after the command returned or was killed (its cut-off; it
// may hang up to the command timeout, then its whole process group is
// killed and the fleet waits at most 2 s more for its output), and the
// server counts as down, no new job of it is created (ErrServerBusy) and OpenFleet refuses an
// inventory without it (ErrMissingServer, unless the operator abandoned
// it: then removing it is their call) until a health check begun after
// then passes. A server without a reboot command fails its job at once,
// saying why. A job whose command was not sent yet when the executor is
// restarted elsewhere (its server no longer Options.Self) never runs it
// (it is a local command): it undoes its drain and fails, saying so.
//
// BMC calls go through a power.Pool (one connection per server, every
// call bounded by Options.CallTimeout, back-off per BMC and login; a
// changed password, keyed by a fingerprint of its content, is a new login
// tried at once). Every BMC error
// is classified (BMCAuth, BMCUnreachable, BMCTLS, BMCTimeout, BMCBusy,
// BMCUnsupported, BMCConfig, BMCFailed), recorded as the server's last BMC
// error (Fleet.Status, with the power phase), logged at Warn at most once
// a minute per server and class, and given to Options.OnBMCError; a job
// that times out carries it in its error, so the plan records the real
// cause.
//
// ObserveView (plan.ViewFleet) observes a view of a plan: the view's
// servers and jobs only, with Offline listing the servers the fleet may
// have powered off (tracked in memory, not read from every record) and
// the plan's servers the inventory lacks, so that an executor's pass costs
// O(reboots in flight) whatever the plan's size (BenchmarkExecutorPass).
// A reboot job is refused (ErrServerBusy) while the power cycle of an
// earlier job that gave up on its BMC has not settled.
//
// The state file stays the size of the jobs in flight: Prune removes a
// job once it ended at least Options.JobRetention ago, its plan has
// recorded its end (the plan never reads or creates it again; what plan
// show and plan report say of an ended plan is in the plan store), and its
// server's power cycle has settled. Status and Prune read only the records
// of the servers and jobs they show or remove (kept in memory which they
// are), never every record (BenchmarkPassBookkeeping).
//
// Observe never waits for a server: health checks run in the background
// (at most 32 at once, results reused for Options.HealthTTL) and their last
// results count; a server never checked yet counts as down, and so does one
// whose last result is older than Options.HealthMaxAge (measured on the
// monotonic clock from the start of its check): no start relies on an
// observation older than that.
//
// # The caller's duties
//
//   - The fleet state file is opened as what its path names, never
//     through a symbolic link, and only as a regular file with one link
//     (ErrNotStateFile): an executor run as root never writes a database
//     into the file a link's owner chose.
//   - One executor per fleet state file (bbolt's lock enforces it), and
//     one per plan store: cmd/rebootctl's executor holds a lease in the
//     store, renewed at every pass (and every interval during a long one)
//     and checked before every first power-off (Options.PlanCheck), so
//     that a second one is refused whatever state file or path it is
//     given; and one that would take the store over from a dead executor
//     with another state file is refused while that file owes a server
//     anything: a job in flight of a plan in any state, or what
//     Fleet.Owed lists (a job not ended, a power cycle not settled),
//     which the executor records in the store with every claim (it knows
//     nothing of them, and would start each again, or never finish a
//     power cycle or an undrain). The state file is told by its ID
//     (Fleet.ID: random, kept in the file, given at its first open,
//     handed to Options.Claim before any job resumes), not by the
//     machine's hostname nor its path, and a copy of it taken before from
//     the file by its generation (Fleet.Advance, FleetIdentity): the
//     executor advances it before every pass and records it in its
//     lease, and refuses a file at neither that generation nor the one
//     before it.
//   - Health checks must fail while a server is down and pass only when
//     its services are really up: the plan trusts them for "operational".
//   - Drain and undrain commands must be idempotent: a restarted executor
//     may run the one it was in the middle of again.
//   - A blocking condition's command must exit 0 only when reboots may
//     start; Observe runs each of an unfinished plan's conditions (30 s
//     timeout each, the inventory's command environment) at every pass.
//
// Observe reports each job's phases for the plan's report (plan.Phases):
// drained when the drain command ended, off at the first Off reading after
// its power-off was sent (the hardware's evidence; the job relies on it as
// fencing evidence only StaleReads later), else when the job saw its
// server fenced, on when the reboot controller powered it on (its record is kept
// to the second, so never before off), healthy when the health check
// first passed after the power cycle. Job steps and reboot decisions are
// logged with the server's hostname.
//
// # Guarantees
//
// Under the reboot package's assumptions (a BMC reports no state older
// than reboot.Config.StaleReads; nobody powers a server on or off out of
// band during its reboot) and one of this package's (a power-off the BMC
// accepted takes effect within Options.ShutdownMax of being sent, or
// never), checked against the fake hardware's ground
// truth by TestJobStateMachine (adversary BMCs, one of them dead for ever
// in its liveness phase, executors killed between any two steps, clocks
// stepped, commands that fail, hang or answer late, the executor's own
// server set mid-plan, operators' commands, plans ending while jobs run):
//
//   - A job powers its server off and on at most once, across restarts.
//   - No server is left off: a job ends only after its server read on,
//     or, when its BMC stopped answering mid-cycle, after the job timeout,
//     and the fleet reconciles every server it asked to power-cycle until
//     it reads on (unless the operator abandons it).
//   - A job done means a power cycle of its own request happened; every
//     end of a job undoes its drain; the executor's own server is never
//     powered off through its BMC.
//   - Once a job is cancelled, timed out, or its plan ended or gave up on
//     it, no power-off reaches its server's BMC unless one of its reboot
//     may already have been accepted: accepted, timed out, or sent by an
//     executor that was killed before it learned the answer; and once the
//     job has given up on its power cycle (timed out mid-cycle, still
//     undraining) or ended, none at all (the fleet only powers the server
//     on).
//   - One live job per server.
//   - A server counts as down while its health check fails, a job may
//     power it off, or a power cycle of the fleet has not settled (once
//     its job ended: until a health check begun Options.ShutdownMax after
//     its last power-off passes); its services count as up only when the
//     check passes, no job is busy with it and it does not count as down
//     (the headnode's services too: HeadnodeServicesUp is false while a
//     power-off of ours may still land on it). With the plan's rule
//     (offline servers count against the concurrency) no more servers are
//     off at once than the concurrency (servers the operator abandoned
//     counted too, while they are off), also when a power-off the BMC
//     accepted before its job ended takes effect late (assuming it does
//     within ShutdownMax, or never).
//   - Commands (drain, undrain, reboot, health, conditions) run with PATH,
//     HOME, SSH_AUTH_SOCK and defaults.command_env only, never a BMC
//     password variable; errors about addresses never echo credentials.
package inventory
