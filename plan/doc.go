// Package plan runs rolling reboot plans over a datacenter, as sdcadm's
// reboot-plan does: core servers first, one at a time, the headnode first
// among them; then the rest, at most Concurrency servers offline at once.
//
// A plan is a JSON document (Encode, Decode) with the seed's fields: uuid,
// state, concurrency, and per server server_uuid, server_hostname,
// boot_platform, current_platform, headnode, job_uuid, started_at,
// finished_at, operational_at, canceled_at; plus the bookkeeping that lets
// an executor resume (core, step, step_since, frozen, error), the policy
// (windows, ramp, domain_limits, conditions) and the servers' labels.
// Unknown fields are rejected.
//
// # Life of a plan
//
//  1. Create it from the fleet: by list, core, non-core or all servers;
//     warnings for servers already on the target platform and for
//     downgrades (platforms compare as versions) refuse creation unless
//     IgnoreWarnings; SkipCurrent leaves current servers out; DryRun goes
//     through the motions without jobs (and blocks no other plan). Store it with Store.Create, which
//     refuses a UUID in use (ErrExists) and a server in another unfinished
//     plan (ErrServerInPlan), whatever the caller checked.
//  2. Run it (Run); Stop pauses it (no new reboots, in-flight ones finish),
//     Run resumes, Cancel ends it (in-flight ones still finish and are
//     recorded). Apply them with Command: every store write is
//     compare-and-swap on Plan.Version, so an operator's command and an
//     executor's pass written at once are never lost; the loser reads again
//     and decides again, and a cancel is obeyed at the latest in the
//     executor's next pass. On a HeadStore (BoltStore, the etcd store) a
//     command reads and writes the plan's header only, whatever the plan's
//     size, so it lands while an executor rewrites the plan every pass;
//     Edit is the whole-plan read-modify-write for tools and tests. A
//     write that sets a plan that ended (finished, nothing in flight)
//     unfinished again (ErrEndedOverlaps, wrapping ErrServerInPlan), or
//     clears DryRun on an unfinished plan (ErrServerInPlan: a dry-run plan
//     blocks no other, so another may hold its servers), is checked
//     against the other plans as Create checks a new one (NewlyHolds).
//     A write that sets DryRun on an unfinished plan that is not a dry
//     run is refused (ErrDryRunSet: a dry run holds no server, and its
//     reboots may have started), and so is one that changes a plan's
//     servers, in every store.
//  3. An Executor runs passes: load the plan, observe the fleet, call Next,
//     save the plan, then act (create reboot jobs, freeze or unfreeze the
//     database shard). Next is pure. Each server goes through the seed's
//     steps — wait for the headnode's services, freeze the shard if its
//     primary is here, create the reboot job (with drain), wait for drain
//     (15 min), the job (1 h) and the services (1 h), check the shard and
//     unfreeze — and each step is recorded before the next starts, so an
//     executor killed at any point (the headnode it runs on reboots as part
//     of the plan) resumes without a second job or reboot: job UUIDs are
//     derived from the plan and the server, and creating a job is
//     idempotent.
//     A job is the real start of a reboot: it is created only while fewer
//     than Concurrency other servers of the plan are offline, also when it
//     comes after the shard freeze, the headnode wait, or a crash.
//     The headnode and the shard are optional abilities of the Fleet,
//     found by type assertion: only a HeadnodeFleet whose HasHeadnode is
//     true makes reboots wait for the headnode's services, and only a
//     ShardFleet is asked to freeze. The shard is frozen only once the
//     primary's job may start, and a reboot held after the freeze (a
//     window closing, a condition failing, the limits, a stop, or its job
//     taken for lost: the fleet refused it) unfreezes it and freezes again
//     when its job can start. Plan.Waiting names what
//     a reboot waits for. The unfreeze is bounded like every step: a
//     shard still frozen ServicesTimeout (1 h) after its primary's
//     services came up fails the reboot (left frozen if unhealthy; if
//     healthy, the executor goes on asking, the reboot in
//     failed_unfreeze holding no slot, and the plan cannot end before
//     the shard is unfrozen: Waiting and the reboot's error say so).
//  4. Held reboots: a reboot that left pending but whose job is not
//     created (or was lost before the fleet showed it: an executor killed
//     between save and act, a CreateJob error) has not started: its
//     JobTimeout does not run while it is held, and it is never counted
//     failed for it. A job asked for is taken for lost only when the fleet
//     has not shown it Config.ShowTimeout (1 min) after the last ask's
//     calls returned, counted from the start of the first pass after the
//     ask (Reboot.ShowFrom: a pass's calls may take long, and passes are
//     sequential), never from the decision: until then it may run, so its server counts offline and its reboot
//     is neither held nor released, whatever the plan's state (a fleet
//     must show a job it created within ShowTimeout). A job the fleet
//     never shows though it is asked for again whenever the limits allow
//     (it refuses it every time) is given up JobTimeout after the first
//     ask: the reboot is released (StepReleased, its error says the fleet
//     refused or lost the job, or the executor's calls never reached it:
//     a record cannot tell, the executor's log can), not counted failed,
//     and the plan ends failed rather than complete. Each fleet call of a
//     pass has its own deadline (Executor.CallTimeout, at most a quarter
//     of what is left of the pass, or an equal share of it among the
//     last actions of the pass when fewer than four are left, and at
//     most half of what is left of the executor's pass when the plan
//     shares it with others, half of the whole pass in its long turn,
//     see Turns), and a server whose call ran out
//     of time has its actions taken after the others in the next passes
//     (the last one has all they left): a call that hangs never keeps the
//     pass from the other servers. After Stop, Cancel or the end of the plan (the
//     failure budget spent) no job is created, but by a pass that read the
//     plan before a command landed: a pass reads the plan's state again
//     before its first job, every 16 jobs and every freeze of the
//     database shard (Executor.Pass: no freeze follows a command that
//     landed before it), so at most
//     16 jobs follow a command that lands while it creates them (on a
//     CommandStore, such as rebootctl's store, where a command lands next
//     to the store first (or, where that cannot be, in the store itself,
//     written by another process: rebootctl's CommandPending sees both),
//     and the etcd store, it looks before every job:
//     none but the one in flight, and on etcd those started within 20 ms
//     of its last look); a stopped plan's held
//     reboots wait for Run, a canceled or ended plan's are released
//     (StepReleased: not started, no failure) and the plan finishes.
//  5. A failed step gives the server canceled_at and an error. A job that
//     timed out is cancelled through the fleet (Fleet.CancelJob) and the
//     server counts as offline until the fleet says the job ended: a job
//     may still reboot its server after the plan gave up on it. After
//     that it counts as offline while the fleet observes it down (an
//     inventory fleet keeps a server its job may have left off, or may
//     still power off late, down until it cannot be: inventory's doc). Failures
//     beyond the failure budget stop the plan from starting more reboots.
//     End states: complete (every reboot succeeded), failed (some failed
//     or were given up as the fleet never showed their job, or the budget
//     ran out), canceled. A plan is never complete while a
//     reboot is pending.
//
// # Offline, the one definition
//
// A server of the plan is offline if it is observed down, not observed at
// all, its reboot is in flight (but held in wait_headnode while the fleet
// shows no job of it: before its job was asked for, or after the job asked
// for was taken for lost), or a job of ours may still run on it (Offline). Every start decision uses it, core servers included: nothing
// starts while offline >= Concurrency, whoever took the servers down, and
// the plan then says why in Plan.Waiting and the progress line ("waiting:
// 3 server(s) offline (1 rebooting, 2 down or unknown for other reasons),
// concurrency 2").
//
// # Windows, ramp, failure domains, blocking conditions
//
// Four more limits hold every start (the pending reboot's and, again, its
// job's creation), all decided by Next from the plan, the observations and
// the time it is given:
//
//   - Windows: reboots start only while a maintenance window is open
//     (weekly windows in a time zone of the Go time zone database, and
//     absolute ranges), and only if the window stays open for as long as a
//     reboot takes from its job's creation (Need: Windows.Expect when set,
//     else the 90th percentile of the reboots done with the longest left
//     out, from Index.DoneHist; an estimate that rests on fewer than 10
//     reboots done, where leaving the longest out makes it the second
//     longest whatever the percentile, holds a start until a window long
//     enough for it, but never holds the plan for good: when no window is
//     that long, starts wait for no estimate until 10 reboots are done,
//     each starting until its window closes). A reboot that started finishes whenever
//     it finishes. Outside, Waiting says until when and which estimate
//     holds the plan; the ETA (Summarize, View.SummaryAt) counts only the
//     time the windows are open, and is Never when no window of the next
//     400 days is long enough for one reboot. The next window is cached
//     between passes.
//   - Ramp: the concurrency follows the canary ramp (RampLimit) by the
//     number of reboots done that are not core (core servers go one at a
//     time anyway: the headnode never spends the first stage); failed ones
//     do not move it on, and the
//     failure budget stops the plan as always.
//   - DomainLimits: at most so many servers offline per value of a label
//     (rack, zone), counted with the one meaning of offline. A reboot whose
//     domain is full is held in wait_headnode (not offline while no job
//     of it was asked for) and the next ones are tried: a domain limit
//     holds only its own domain. Reboots otherwise start in plan order, so
//     Create orders the servers that are not core to interleave the
//     domains. Held reboots are loaded by every pass (they are in flight). On a partial view the pass needs the plan's
//     DomainTable (the Executor reads it once per plan).
//   - Conditions: each blocking condition's last result
//     (Observations.Conditions, which the fleet checks before each pass)
//     must be a success no older than Config.ConditionMaxAge; a failure
//     holds the plan and its output is kept in Plan.WaitingOutput.
//
// Scheduling is a sliding window, not the original tool's fixed batches:
// the moment a reboot ends, the next starts. On a simulated datacenter of
// 200 servers with log-normal reboot times (BenchmarkMakespan) fixed
// batches take 1.51 times as long, and the sliding window is within 1.05
// of a lower bound.
//
// For reports, a plan also keeps what no decision reads: each reboot's
// Phases as the fleet reported them (drained, off, on, healthy; the first
// report of each wins) and the operators' Commands (Record), and, for a
// tool that replays numbered commands recorded elsewhere, how far each
// source's were applied (Replays, RecordReplay).
//
// MayRebootOutside is the guard for everything else: while a plan is
// unfinished, its servers may only be rebooted by it. Summarize, Line and
// Table show progress to a person. FileStore keeps plans as files, written
// atomically and durably under a directory lock; a file that is corrupt,
// not a regular file, larger than MaxDocumentBytes, or whose uuid is not
// its name is reported (ErrCorrupt, ErrTooLarge) and never overwritten.
// Decode accepts only what Encode can write back, with valid UUIDs, core
// servers before the others, and at most MaxServers servers.
//
// BoltStore (one bbolt file, opened by one process at a time) keeps a
// header record (the plan without its reboots, its Index, its version) and
// one versioned record per reboot. What the world writes into a record is
// bounded: Validate refuses names over MaxNameBytes and labels over
// MaxLabelBytes per server, and NextView cuts a reboot's error text (and
// the plan's Waiting) to MaxErrorBytes (BoundText), so a record stays a
// few KiB whatever a fleet reports. Import reads the JSON files of a
// FileStore directory; the JSON document stays the export/import and watch
// format.
//
// # Passes in O(reboots in flight)
//
// Reboots start in plan order, so the started ones are a prefix of the
// plan and the core ones a prefix too; an Index in the header counts what
// lies behind (done, failed, failures, the positions in flight). A View is
// the header, the Index, the reboots in flight and the next PendingInView
// pending ones (a BoltStore view at most BoltMaxStartsPerPass of them, so
// that a pass's read of the file stays short: a plan whose concurrency is
// higher starts that many per pass and reaches its concurrency over
// several passes); NextView decides on it exactly as Next decides on the
// whole plan (Next is NextView on FullView), and keeps the Index. A
// BoltStore view can be read (ReadView: the bytes, in one transaction)
// apart from its decoding (ViewRead.View), and its changed reboots
// encoded before the write (EncodeView), so a process that holds the file
// only for each read and write decodes and encodes without it. A store that
// holds at most so many reboots of a plan in flight says so in its views
// (View.MaxInFlight): NextView then starts none while that many are in
// flight, and the plan waits with the reason in Plan.Waiting. When the Store
// is a ViewStore (BoltStore; Views adapts any Store) and the Fleet a
// ViewFleet, the Executor reads, observes and writes views only: a pass
// costs O(reboots in flight) whatever the plan's size (about 1.1-1.3 ms and
// 14 KB written at 1,000 to 100,000 servers with 25 in flight,
// BenchmarkPassStore), and a whole 100,000-server plan runs in under 40 s
// (BenchmarkWholePlan).
//
// The one thing a view cannot see is whether the plan's other servers are
// offline, so a ViewFleet lists every server it knows to be down or cannot
// observe (Observations.Offline), and a server of the plan it does not
// list counts as up: that is the assumption views rest on. A fleet that
// cannot list what it does not know must stay a plain Fleet (the Executor
// then works on whole plans).
package plan
