// Package remediation remediates a failed node by power-cycling its
// bare-metal host: power the host off, delete the Node object (or taint it
// out-of-service) while the host is known to be off, power the host back
// on, and wait for the node to return.
//
// It drives the reboot package's API: it adds and removes the keyed
// annotation reboot.metal3.io/machine-remediation on the host, with hard
// mode (fencing must not wait for a soft shutdown) and the Machine's UID in
// the value. The reboot controller holds the host off while the annotation
// is there.
//
// # Two modes
//
// Table is the design document's stateless truth table, reproduced row by
// row (16 rows; the document lists 15). It has a flaw that broke the one
// real implementation: after the node is deleted and the needs-remediation
// annotation removed, a health checker whose timeout expires before the
// server has booted re-adds its annotation, and the table reboots the host
// again, and again (TestTableLoopsPhasedDoesNot: 10 power-offs in 10
// minutes for one failure).
//
// Phased (Config.Decide, the default) persists a phase per Machine and keeps
// the needs-remediation annotation until the node is back, so a re-added
// annotation changes nothing: one failure, one power cycle, unless a retry
// is decided. Phases: power-off-requested, node-deleted, powering-on,
// waiting-for-node, done, failed.
//
// # The caller's duties (phased)
//
//  1. Read the Machine (with its persisted State), its Node and its host's
//     power state and reboot annotation.
//  2. Before a new remediation may start, ask the storm guard (MayStart)
//     over the whole fleet and pass its answer as Observed.MayStart.
//  3. Call Decide with your controller's clock.
//  4. Persist Decision.State first (optimistic concurrency; on a conflict
//     start again at 1), then apply the side effects in the order the
//     Decision documents. Deleting or tainting the Node is only ever asked
//     while the host is observed off in this pass.
//  5. Look again after RequeueAfter, and whenever the Machine, Node or host
//     changes. A crash between any two steps is safe: the next pass repeats
//     what was not done, and never skips a step.
//
// Reconciler does this over MachineStore, NodeStore and HostStore.
//
// # Guarantees, checked by property tests
//
// A Node is deleted or tainted only while its host is observed off. When a
// remediation finishes, fails or is cancelled (the needs-remediation
// annotation removed mid-way), its reboot annotation is removed, so no host
// is left off. A host is power-cycled once per attempt; retries (default
// one) happen only after Timeout (default 10 min); when they run out the
// Machine is deleted if a controller owner will replace it, else the
// remediation is marked failed. The Node's labels and annotations are
// backed up and restored on the new Node (values already there win).
package remediation
