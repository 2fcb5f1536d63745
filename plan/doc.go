// Package plan runs rolling reboot plans over a datacenter, as sdcadm's
// reboot-plan does: core servers first, one at a time, the headnode first
// among them; then the rest, at most Concurrency servers offline at once.
//
// A plan is a JSON document (Encode, Decode) with the seed's fields: uuid,
// state, concurrency, and per server server_uuid, server_hostname,
// boot_platform, current_platform, headnode, job_uuid, started_at,
// finished_at, operational_at, canceled_at; plus the bookkeeping that lets
// an executor resume (core, step, step_since, frozen, error). Unknown
// fields are rejected.
//
// # Life of a plan
//
//  1. Create it from the fleet: by list, core, non-core or all servers;
//     warnings for servers already on the target platform and for
//     downgrades (platforms compare as versions) refuse creation unless
//     IgnoreWarnings; SkipCurrent leaves current servers out; DryRun goes
//     through the motions without jobs. Save it in a Store.
//  2. Run it (Run); Stop pauses it (no new reboots, in-flight ones finish),
//     Run resumes, Cancel ends it (in-flight ones still finish and are
//     recorded). Save after each.
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
//  4. A failed step gives the server canceled_at and an error. Failures
//     beyond the failure budget stop the plan from starting more reboots.
//     End states: complete (every reboot succeeded), failed (some failed,
//     or the budget ran out), canceled. A plan is never complete while a
//     reboot is pending.
//
// Scheduling is a sliding window, not the original tool's fixed batches:
// the moment a reboot ends, the next starts. On a simulated datacenter of
// 200 servers with log-normal reboot times (BenchmarkMakespan) fixed
// batches take 1.51 times as long, and the sliding window is within 1.05
// of a lower bound.
//
// MayRebootOutside is the guard for everything else: while a plan is
// unfinished, its servers may only be rebooted by it. Summarize, Line and
// Table show progress to a person. FileStore keeps plans as files, written
// atomically and durably; a corrupt file is reported and never overwritten.
package plan
