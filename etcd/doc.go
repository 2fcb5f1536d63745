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
// reboot records. A plan is read at one revision (its header, then its
// pages at the revision the header was read at), so compaction never makes
// it unreadable; its Version (the header's ModRevision) serves only for
// compare-and-swap. Every write compares it; a write that fits etcd's
// default limits (128 operations, 1.5 MiB) is one transaction, a larger one
// writes its pages under keys of their own first and then the header that
// names them, so whatever the concurrency a pass is written whole or not
// at all. A view loads at most MaxStartsPerPass pending reboots (and keeps
// at most MaxInFlight in flight), so a pass starts at most that many and
// the next pass goes on. List and Unfinished
// read at one revision and report corrupt records (plan.ErrCorrupt); Create
// fails on any other error, and writes the plan's header in a transaction
// that also compares that no plan was created since it checked the others
// (then it checks again): two overlapping plans created at once cannot
// both succeed. Operators' commands (plan.Command with Run, Stop, Cancel)
// are plain compare-and-swap writes from any process and are never lost.
//
// Candidate, Leadership and Executor: an executor campaigns through
// concurrency.Election on a session lease; the Leadership's Store adds to
// every write a comparison of the election key it holds, so an executor
// that lost its lease can never write again, even if it does not know yet
// (ErrNotLeader); and every action it asks of the fleet carries its
// fencing token (the election key's create revision, plan.Action.Fence).
// Leadership.Guard gives the same leadership as a reboot.Guard, the fence
// reboot.Reconciler and remediation.Reconciler ask before every write and
// power call when their stores are not this etcd. Executor.After paces
// the passes on the caller's clock.
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
//     A fleet that does not is asked plainly (FreezeShard, UnfreezeShard),
//     and then only the executor's own checks stand between a deposed
//     leader and a late freeze or unfreeze: the one right before each
//     action (below), not atomic with it.
//   - Give every executor its own client or session; pick a TTL longer
//     than the pauses you expect of a healthy executor (GC, I/O), shorter
//     than the gap you accept.
//
// # Guarantees (assuming etcd's linearizable transactions)
//
//   - At most one executor writes a plan at a time, and a deposed one
//     never writes again.
//   - Each pass first renews the leadership's lease and checks its
//     election key (Leadership.Pass); it acts on the fleet only while that
//     lease, as renewed, cannot have run out (90 % of its TTL after the
//     renewal was sent), and not at all once the session ended: a pass of
//     a leader whose lease is gone does nothing, even a pass that would
//     write nothing, and a pass that outlasts its lease stops acting
//     (ErrNotLeader, ErrInDoubt).
//   - With a fleet that checks fencing tokens as above, a deposed executor's
//     late actions do nothing; no server gets two jobs; the concurrency
//     holds (TestFailover against an embedded etcd; TestEtcdCluster against
//     a three-member cluster whose members are killed, compacted and cut
//     off).
//   - A plan survives the loss of every executor: the next one to lead
//     resumes it from the store.
package etcd
