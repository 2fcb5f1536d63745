// Package etcd runs rolling reboot plans on etcd (go.etcd.io/etcd/client/v3
// v3.7.3), so that a datacenter's rolling reboot does not depend on one
// machine: any number of executors, on different machines, campaign for
// the leadership; the leader runs the passes; when it dies, is paused or
// partitioned, another takes over once its lease expired: the lease TTL
// (DefaultTTL, 5 s) plus etcd's expiry check and the election's watch,
// about half a second more (BenchmarkFailover: 5.4 s at the default TTL).
// It is its own Go module (github.com/rebootkit/rebootkit/etcd), so that
// the core module does not depend on etcd's client (and its tests' on the
// server).
//
// Store is a plan.ViewStore: a header key per plan and pages of PageSize
// reboot records. A plan is read at one revision (its header, then its
// pages at the revision the header was read at), so compaction never makes
// it unreadable; its Version (the header's ModRevision and the random
// token of the write that stored it, PREFIX writes/UUID: whether that key
// exists and, if it does, its value, whatever it holds) serves only for
// compare-and-swap. Every write compares both and puts a new token; a write that fits etcd's
// default limits (128 operations, 1.5 MiB) is one transaction, a larger one
// writes its pages under keys of their own first and then the header that
// names them, so whatever the concurrency a pass is written whole or not
// at all. A view loads at most MaxStartsPerPass pending reboots (the first
// pending one always), and a pass starts none while MaxInFlight (100,000)
// of the plan's reboots are in flight (plan.View.MaxInFlight: a plan of
// more servers whose concurrency allows more waits, its reboots in flight
// go on and end, and it ends on cancel as any other), so a pass starts at
// most that many and the next pass goes on: the start rate is at most MaxStartsPerPass
// (1,536) per pass, and a plan has at most its concurrency, or
// MaxStartsPerPass times the number of passes a reboot lasts, in flight,
// whichever is less (at 50 % of 100,000 servers, a pass every 30 s and
// reboots of 6 minutes: 12 passes, 18,432 reboots in flight; with the
// Executor's 1 s Interval, the concurrency). List, Heads and Unfinished
// read at one revision and report corrupt records (plan.ErrCorrupt); Create
// fails on any other error, and writes the plan's header in a transaction
// that also compares that no plan was created or set unfinished again
// since it checked the others (then it checks again): two overlapping
// plans created at once cannot both succeed. A write that sets a plan
// that ended unfinished again, or clears DryRun on an unfinished plan
// (plan.Command, plan.Edit: plan.NewlyHolds), is checked the same way,
// and refused (plan.ErrServerInPlan; plan.ErrEndedOverlaps too for a plan
// that ended) while another unfinished plan holds one of its servers. A
// write that sets DryRun on an unfinished plan that is not a dry run is
// refused (plan.ErrDryRunSet): a dry run holds no server, and its reboots
// may have started. Operators' commands (plan.Command with Run, Stop, Cancel)
// are compare-and-swap writes of the header alone (Store is a
// plan.HeadStore: one read and one write, whatever the plan's size) from
// any process, and are never lost: a pass written in between makes the
// command read again, and the command's write makes the pass decide again.
// Store is also a plan.CommandStore: before every job a pass creates,
// CommandPending compares the header the pass last read the plan's state
// from (GetState) with the stored one, in one small read-only transaction,
// and the pass reads the state again when it changed: a command that
// landed is followed by no job but the one being created as it landed and
// those the pass starts within 20 ms of its last comparison (pendingEvery:
// a comparison counts for that long, so a pass creating jobs back to back
// pays one per 20 ms, not one per job; none when its jobs take longer).
//
// Candidate, Leadership and Executor: an executor campaigns through
// concurrency.Election on a session lease; the Leadership's Store adds to
// every write a comparison of the election key it holds, and to every
// delete (Sweep, SweepOrphans, Prune, the clean-up after a write), so an
// executor that lost its lease can never write or delete again, even if it
// does not know yet (ErrNotLeader); and every action it asks of the fleet carries its
// fencing token (the election key's create revision, plan.Action.Fence).
// Leadership.Guard gives the same leadership as a reboot.Guard, the fence
// reboot.Reconciler and remediation.Reconciler ask before every write and
// power call when their stores are not this etcd; it stops answering,
// and the contexts it handed out end, within a watch's latency of its
// election key's deletion (an operator's `etcdctl del`, or its lease
// revoked). Executor.After paces
// the passes on the caller's clock. A pass (Executor.PassTimeout) gives
// each unfinished plan its own share of what is left of it, and each
// fleet call its own deadline within that (plan.Executor.CallTimeout): a
// plan whose observation or call hangs never starves the leader's others.
//
// # Retention, and what the etcd operator must run
//
// A plan that ended (finished, nothing in flight) stays whole for the
// Executor's Retention (DefaultRetention, 7 days; negative: forever), so
// that Get, List and a report read its reboot records; then the leader
// replaces it with its summary (Store.Prune: an Archived record under
// PREFIX summaries/, a few hundred bytes, listed by Summaries) and
// deletes its header and every page key. Archive a plan's records before
// the retention runs out if they must be kept (Store.Get, then
// plan.Encode). The leader prunes every ten minutes, whatever its
// passes return (a plan whose pass fails never stops it), and then sweeps
// the page keys no header names (Store.Sweep: staged pages of a write that
// lost or whose writer died). Every delete of page keys (Sweep, and a
// write's clean-up of the keys it stopped naming) compares the header's
// revision and token as that caller read or wrote them, and the guard: a
// write that names a page key again in between (a page put back under
// the plan's own key) makes the delete fail, and Sweep reads the header
// again (a write's clean-up leaves the keys to Sweep). Every cache a store
// keeps of a plan (its header, member map, pages read whole and of the
// last view) is forgotten when the plan ends, when Get, List or GetView
// reads it ended, and when Unfinished finds the index no longer names it
// (another writer ended it). Create is idempotent for the same request: the header records a
// hash of the plan as given, so a retry after a lost answer succeeds.
//
// Measured (BenchmarkFinishedPlanBytes): a finished plan of 100,000
// servers holds 3,126 keys and about 52 MB of keys and values; after
// Prune, one key of about 400 bytes. Prune also keeps the hash of the
// Create request in the summary, so a Create retried after its plan was
// pruned succeeds without creating it again.
//
// What a pass reads does not grow with the plans retained: an index key
// per unfinished plan (PREFIX unfinished/UUID, put by the transaction that
// creates the plan, deleted by the write that ends it, both
// compare-and-swap on the header) answers Unfinished, the passes and
// Create's check of the other plans, which read the index and the headers
// (and, for Create, the pages) of the unfinished plans only. A prefix
// written by a version without the index is indexed from its headers by
// the first Unfinished (the PREFIX unfinished key marks it done). When
// upgrading, stop every writer of the older version (executors, rebootctl)
// before the first Unfinished of the new one: once the marker exists, the
// index is the only list of unfinished plans the new version reads, and a
// plan an old writer creates (or sets unfinished again) afterwards has no
// index key, so Create's check of the other plans misses it (two plans
// over one server) and no pass runs it. Heads
// lists every retained plan from its header alone (the summaries, no page
// read); List (plan.Store) returns whole plans, so it reads every page of
// every retained plan: it is not for listing. Get and List cache only the
// plans that may still act. Maintain also deletes the pages of UUIDs that
// have no header (a Create whose writer died) once they are older than the
// previous Maintain (Store.SweepOrphans).
//
// Deleting keys does not shrink etcd: every write leaves history until
// compaction, and compaction leaves free pages until defragmentation. Run
// etcd with auto-compaction (e.g. --auto-compaction-mode=periodic
// --auto-compaction-retention=1h), a backend quota with room for the
// history of that period (--quota-backend-bytes), and defragment each
// member in turn (etcdctl defrag) after large prunes, e.g. daily. The
// history a leader writes is what its passes change: BenchmarkPass
// reports it (bytes-written/pass, a pass every 30 simulated seconds): at
// 100,000 servers, about 440 KB per pass at 5 % concurrency and 2.4 MB
// per pass at 50 % (up to 1,536 reboots started per pass, their pages
// rewritten): size the quota for the passes of one compaction period.
//
// # Pass time, measured
//
// A store keeps the header of each unfinished plan as it last read it or
// its pass wrote it (at most 1,024 plans), with its version (the header
// key's ModRevision and its write's token), and the pages of the plan's
// last view, decoded and as stored: the ones GetView read, then the ones
// PutView wrote, at the version its write made. Every write rewrites the
// header and puts a new random token (16 bytes from crypto/rand) in the
// same transaction, so while the header key's ModRevision and the token
// are still that version nothing of the plan changed: the reads of a pass
// (the index of unfinished plans, GetView, and GetHead, the read of the
// plan's state before every 16 jobs it creates) compare both in etcd
// instead of fetching and decoding the header again (tens of KB with
// thousands of reboots in flight), and GetView reads, in
// the same read-only transaction, only the pages its last view did not
// hold (the next pending ones). After another writer (an operator's
// command, an edit, a second store) the header is fetched and decoded
// again, and the view's pages are read again, decoding only those whose
// stored value changed. PutView encodes only the pages holding a reboot
// that changed (plan.SameReboot), and writes only those whose encoding
// changed. A plan served from the kept header (GetHead, GetView, Get)
// shares no memory with it, its policy included: a caller may change its
// copy. Unfinished evicts every plan any cache holds that the index no
// longer names (another writer ended it), and any read of a header that
// finds the plan ended (GetState, GetHead, Heads, Get, List, GetView)
// evicts that plan: nothing of an ended plan is kept.
//
// BenchmarkPass against a real etcd server process (v3.7.3, fsync on, one
// member on the same machine), on a 2-core machine whose load average was
// 13 to 22 while it ran (other jobs), a pass every 30 simulated seconds of
// a plan of 100,000 servers, 20 passes in the steady state with reboots in
// flight:
//
//	REBOOTKIT_ETCD_BIN=/path/to/etcd REBOOTKIT_BENCH_ETCD=process \
//	  go test -run '^$' -bench 'BenchmarkPass/servers=100000/concurrency=(5000|50000)$' -benchtime 20x -benchmem ./
//
//	concurrency  wall ms/pass  CPU ms/pass  etcd calls/pass, wait  allocated/pass         written/pass
//	5 %          61 to 110     36 to 52     20, 19 to 31 ms        12.5 MB, 19,300 allocs 497 KB, 0.85 txn
//	50 %         806           289          105, 299 ms            55 MB, 104,000 allocs  2.7 MB, 4 txns
//
// The write tokens (review of issue 37, round 4) add no call and no
// measurable CPU: at 5 %, 19.95 calls and 42.7 and 40.3 CPU-ms per pass
// with them, 19.95 calls and 53.2 and 55.8 CPU-ms without (two runs each,
// alternated, load average 12 to 14: the difference is the load's);
// about 400 more allocations per pass (12.4 to 12.5 MB either way).
//
// Before the changes of issue 37, point 5 (the known header, the state
// read alone, one copy of the view, a cheaper fake fleet), run alternately with the rows above on the same machine: at 5 %
// 261 to 290 ms wall, 106 to 110 CPU-ms, 21 calls, 19.7 MB and 63,000
// allocations per pass; at 50 % 5,365 ms wall, 1,325 CPU-ms, 107 calls,
// 175 MB and 654,000 allocations per pass. Most calls are the reads of
// the plan's state before every 16 jobs a pass creates (about 250 jobs a
// pass at 5 %, 1,536 at 50 %); the others are the leadership's check, the
// index, the view and the write.
//
// The wall time follows the machine's load; the CPU time (the executor's
// and the fake fleet's, about a quarter of it at 5 %) and the number of
// calls much less. On a machine that is not loaded a pass costs about its
// CPU time plus the wait for etcd's answers (the write of the changed
// pages, fsync included, and one small read per 16 jobs). On the same
// 2-core machine with nothing else running (load average about 1), after
// the write tokens and the guarded deletes: 42.4, 47.3 and 46.0 ms wall
// per pass at 5 % in three runs (41 to 45 CPU-ms, 16 to 18 ms waiting for
// etcd, 19.95 calls), under the 50 ms goal of issue 37. What is left
// at 5 % (about 6,500 reboots in the view): the fake fleet's observation
// and job creations, the decision (plan.Config.NextView, with its copy of
// the view), the copy of the view's reboots the caller gets
// (plan.OwnReboots), checking the view (plan.View.Check, on the view read
// and on the view written), encoding the changed pages and the header,
// and the garbage collector (about a fifth of the CPU).
//
// An operator's stop or run (plan.Command, header only) on that plan while
// its executor runs passes back to back, same etcd process and load
// (BenchmarkCommandLatency, -benchtime 3x): 24 ms on average, 56 ms at
// worst at 5 %; 460 ms on average, 952 ms at worst at 50 % (the header
// lists the positions of the 50,000 reboots in flight).
//
// # Restoring etcd from a backup
//
// Restore a snapshot with etcdutl snapshot restore --bump-revision N
// --mark-compacted (N larger than the writes made since the snapshot was
// taken, e.g. 1000000000), and restart every executor and rebootctl after
// the restore. With --bump-revision every revision after the restore is
// higher than any an executor saw before, and --mark-compacted makes the
// executors' watches (the election) fail and start again instead of
// missing the restored history. Without it (a copy of the data directory
// put back, or a snapshot restored without the flag), etcd gives
// revisions again that the executors saw before: a revision alone no
// longer tells two writes of a plan apart. The store does not rely on it:
// a plan's version includes the random token of the write that stored its
// header, so an executor that read the plan before the restore finds the
// token changed (it was written before the backup, or by a write after
// the restore) and reads the plan again, and its write of a version it
// read before the restore is refused (plan.ErrConflict) and decided again
// on a fresh read (TestReview37_RestoredEtcdReusesRevisionStopLost: an
// operator's stop written after the restore at the very revision of the
// executor's last write stays). The other checks compare values too, not
// revisions alone: Create's "no plan made unfinished since the check"
// compares a random value every Create rewrites (PREFIX created), the
// build of the index compares each header's token, and SweepOrphans
// deletes nothing unless its own key (PREFIX swept) is still at the
// revision its previous call returned, so that a Create under way after
// a restore keeps its pages. What the restore lost stays lost: the
// passes and commands written after the backup are gone, so a reboot
// started after it is in flight on the fleet but pending in the plan, and
// the next pass asks for its job again (a fleet that keeps its jobs
// outside this etcd must answer with the job the server has, not start a
// second); re-issue the operators' commands given since the backup. The
// fencing tokens (the election key's create revision) are revisions too:
// restore with --bump-revision so that a new leader's token is higher
// than any the fleet saw.
//
// # The caller's duties
//
//   - The fleet must refuse an action whose fencing token is not the
//     current leader's, atomically with doing it: an executor paused
//     between the transaction that saved the plan and the jobs it asks for
//     would otherwise create them late, after the world changed. Best: keep
//     the job records in this etcd and create them in a transaction that
//     includes Candidate.LeaderGuard(token); else ask Candidate.CheckLeader
//     under the fleet's own lock (fake.Fleet.SetFenceCheck does that). A
//     fleet that only remembers the highest token it has seen is not
//     enough: it accepts a deposed leader's late action while no new
//     leader has acted yet (TestFailover found this).
//   - The same for freezing and unfreezing the database shard: implement
//     ShardFencer (fake.Fleet does), whose methods get the fencing token.
//     A fleet that does not is asked plainly (plan.ShardFleet), and then
//     only the executor's own checks stand between a deposed leader and a
//     late freeze or unfreeze: the one right before each action (below),
//     not atomic with it. A fleet without a shard implements neither.
//   - Give every executor its own client or session; pick a TTL longer
//     than the pauses you expect of a healthy executor (GC, I/O), shorter
//     than the gap you accept.
//
// # Guarantees (assuming etcd's linearizable transactions)
//
//   - At most one executor writes a plan at a time, and a deposed one
//     never writes again.
//   - Each pass first renews the leadership's lease and checks its
//     election key (Leadership.Pass), and does so again every third of the
//     TTL while it runs; it acts on the fleet only while that lease, as
//     last renewed, cannot have run out (90 % of its TTL after the renewal
//     was sent), and not at all once the session ended or a renewal found
//     the lease or the election key gone: a pass of a leader whose lease
//     is gone does nothing, even a pass that would write nothing (ErrNotLeader);
//     a pass whose renewals etcd does not answer stops acting
//     (ErrInDoubt); a slow pass of a live leader goes on acting, however
//     long it takes.
//   - With a fleet that checks fencing tokens as above, a deposed executor's
//     late actions do nothing; no server gets two jobs; the concurrency
//     holds (TestFailover against an embedded etcd; TestEtcdCluster against
//     a three-member cluster whose members are killed, compacted and cut
//     off).
//   - A plan survives the loss of every executor: the next one to lead
//     resumes it from the store.
package etcd
