// Package etcd runs rolling reboot plans on etcd (go.etcd.io/etcd/client/v3
// v3.7.3), so that a datacenter's rolling reboot does not depend on one
// machine: any number of executors, on different machines, campaign for
// the leadership; the leader runs the passes; when it dies, is paused or
// partitioned, another takes over within the lease TTL (DefaultTTL, 5 s).
// It is its own Go module (github.com/rebootkit/rebootkit/etcd), so that
// the core module does not depend on etcd's client (and its tests' on the
// server).
//
// Store is a plan.ViewStore: a header key per plan and pages of PageSize
// reboot records, every write one transaction comparing the header's
// ModRevision (compare-and-swap), a pass's writes in one transaction
// within etcd's default limits (128 operations, 1.5 MiB: pages keep a
// 100,000-server plan's pass far below both), List and the cross-plan
// checks with range reads. Operators' commands (plan.Command with Run,
// Stop, Cancel) are plain compare-and-swap writes from any process and are
// never lost.
//
// Candidate, Leadership and Executor: an executor campaigns through
// concurrency.Election on a session lease; the Leadership's Store adds to
// every write a comparison of the election key it holds, so an executor
// that lost its lease can never write again, even if it does not know yet
// (ErrNotLeader); and every action it asks of the fleet carries its
// fencing token (the election key's create revision, plan.Action.Fence).
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
//   - Freezing and unfreezing a database shard are not fenced
//     (plan.Fleet.FreezeShard has no action): keep them idempotent.
//   - Give every executor its own client or session; pick a TTL longer
//     than the pauses you expect of a healthy executor (GC, I/O), shorter
//     than the gap you accept.
//
// # Guarantees (assuming etcd's linearizable transactions)
//
//   - At most one executor writes a plan at a time, and a deposed one
//     never writes again.
//   - With a fleet that checks fencing tokens as above, a deposed executor's
//     late actions do nothing; no server gets two jobs; the concurrency
//     holds (TestFailover, against a real embedded etcd).
//   - A plan survives the loss of every executor: the next one to lead
//     resumes it from the store.
package etcd
