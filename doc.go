// Package rebootkit is a library for controllers that reboot, fence,
// remediate and roll-reboot bare-metal servers safely.
//
// # What it does
//
//   - reboot: the declarative reboot API of the metal3 project, driven by the
//     annotations reboot.metal3.io and reboot.metal3.io/{key}, with the status
//     fields lastPoweredOn and pendingRebootSince, soft and hard modes, and
//     phased reboots that hold a host powered off until every client is done.
//     It also answers the fencing question: are all processes that ran on the
//     host at time T guaranteed stopped?
//   - remediation: power-cycle a failed node, delete its Node object while the
//     host is safely off, power it back on.
//   - nodereuse: re-pick the same hosts during upgrades so their disks are
//     kept (label infrastructure.cluster.x-k8s.io/node-reuse).
//   - plan: rolling reboot plans for a whole datacenter, core servers first,
//     one at a time, then the rest under a concurrency limit.
//
// The packages power (the power-control interface and its error classes),
// power/redfish (that interface over Redfish, with gofish; its redfishtest
// package is a Redfish BMC emulator) and fake (deterministic,
// fault-injecting fakes of every interface, including a simulated
// datacenter) support them.
//
// # Architecture: pure decisions, thin appliers
//
// Every package has a decision function of (observed state, now) that does no
// I/O, reads no clock, uses no global randomness and mutates none of its
// inputs. It returns a decision that says, in order, what the caller must do:
// which state to persist first, which side effect to cause next, when to look
// again. A Reconciler or Executor in the same package applies decisions
// through small interfaces (power control, stores); it is the only code that
// touches a clock or a context.
//
// # The caller's duties
//
//  1. Observe: read the current state from your stores and the power
//     controller. Never guess: an unknown power state is passed as unknown.
//  2. Decide: call the package's decision function with what you observed and
//     the current time from one clock.
//  3. Persist first: write the state the decision asks you to persist, with
//     optimistic concurrency, before any side effect. On a conflict, start
//     again at step 1.
//  4. Act: cause the side effect (power call, node deletion, job) the decision
//     names, and remember the outcome's class (package power) for the next
//     pass.
//  5. Requeue: look again when the decision says. A restart of your process
//     between any two steps is safe: the next pass converges from what it
//     observes.
//
// The Reconcilers and Executors in this module do exactly this; use them, or
// use the decision functions from your own controller.
package rebootkit
