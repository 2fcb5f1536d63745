// Package reboot implements the declarative reboot API of metal3's
// BareMetalHost: clients ask for a reboot by adding an annotation, and one
// controller (yours, using this package) power-cycles the host.
//
// # The protocol
//
//   - reboot.metal3.io: set and forget. The host is powered off and on again,
//     and the controller removes the annotation once the host was observed
//     off.
//   - reboot.metal3.io/{key}: phased. The host is powered off and held off
//     until the client that owns {key} removes its annotation; with several
//     clients, until all have. Only the owner removes a keyed annotation,
//     except on deprovisioning, where every reboot annotation is cleared.
//   - The value is empty or JSON: {"mode":"hard"} or {"mode":"soft"}. Soft
//     (the default) asks the OS to shut down and falls back to hard after
//     Config.SoftTimeout (180 s), at once if the BMC cannot do soft, and when
//     it fails. Hard wins over soft across all clients, also mid-shutdown.
//     A bad value counts as soft with a warning (note that the design
//     document's own {'mode':'hard'} is not JSON); Validate rejects it for
//     webhooks. Values are never rewritten.
//   - Status: PendingRebootSince is when the controller first saw the
//     request; LastPoweredOn when it powered the host on; LastPoweredOff
//     the fencing evidence (see below). A client's reboot is done when its
//     annotation is gone and LastPoweredOn is later than its request.
//     Status.Fenced(T, now) answers the fencing question: are all processes
//     that ran on the host at T guaranteed stopped?
//   - Client is the other side: Request (a keyed annotation written after
//     taking T), Fenced / WaitFenced, Release, Done / WaitDone. Fencing
//     agents and the remediation package use it.
//
// # The caller's duties
//
// Decide is a pure function of (Observed, now). To use it from your own
// controller, for each host and each pass:
//
//  1. Read the host (annotations, Spec.Online, deprovisioning, Status), then
//     your clock (now), then its power state, in that order: evidence from
//     a reading is stamped no later than the reading. If the power read
//     fails, pass power.StateUnknown (null, missing and Paused are unknown).
//  2. Pass the outcome of your last power call for this host as
//     Observed.LastCall (keep it in memory; zero after a restart is fine),
//     and Observed.QuietFor: the time on a monotonic clock since you last
//     sent On to this host, or since your process started if you sent none
//     since (never carry it across a restart).
//  3. Call Decide (or DecideInto, to reuse buffers) with that now.
//  4. If Decision.UpdateStatus, write Decision.Status and delete
//     Decision.RemoveAnnotations, with optimistic concurrency, in one write
//     if you can (else annotations first). On a conflict stop here and start
//     again at 1. Never write timestamps from another clock. Every power-on
//     comes with UpdateStatus: the versioned write is what makes a keyed
//     annotation added since your read stop the power-on.
//  5. Make the power call Decision.Power (Off with Decision.Mode, or On),
//     and remember its outcome class (power.Classify) and time for step 2.
//  6. Run the next pass after Decision.RequeueAfter, at once after a failed
//     power call, and whenever the host changes.
//  7. Report Decision.Warnings (bad values, invalid keys, refused keys) to
//     the clients, e.g. as Kubernetes events.
//
// Reconciler does steps 1 to 6 over a HostStore and power.Controllers.
//
// # Evidence: what an Off reading proves
//
// Real BMCs report the previous power state for seconds after a reset
// (sushy-tools 1 to 11 s, iDRAC similar), report null, leave the state out,
// or say Paused. So a reading is not evidence by itself:
//
//   - Unknown (an error, null, missing, Paused) proves nothing, and a pass
//     that reads it makes no power call at all: some BMCs can only toggle,
//     and a toggle sent to a host that is off powers it on.
//   - Transitioning and On prove the host is not known off.
//   - Off is evidence that the hardware is off at the instant of the read
//     only if it cannot be the echo of the state before this controller's
//     last power-on: at least Config.StaleReads (30 s) has passed, on a
//     monotonic clock, since that power-on was sent (or since the
//     controller started). An Off that might be such an echo is waited out:
//     nothing is removed, powered on or recorded on its strength.
//
// The controller's own commands are what the argument rests on. Between its
// last power-on and now it sent only power-offs, so an Off reading, fresh or
// an echo of a state after that power-on, can only show the hardware off
// after the power-on; an echo of an earlier state is excluded by the wait.
//
// The evidence is kept in Status.LastPoweredOff as the (floored) time read
// just before the Off reading, and moved forward only while a reboot is
// pending and it does not yet cover the latest request seen
// (LastRequestSeen): at most two writes per new request, none per pass of a
// long hold.
//
// # Guarantees, and the assumptions they rest on
//
// Assumptions:
//
//	A1. A BMC reports a state at most Config.StaleReads old after a reset,
//	    and never reports Off for a host that has been on since before the
//	    reset it is echoing (it may report null, Paused or nothing).
//	A2. While a reboot request is pending, nobody powers the host on out of
//	    band; if someone does, the controller powers it off again as soon
//	    as the BMC shows it on, but for up to StaleReads after such a
//	    power-on Fenced may vouch for an instant at which the host ran.
//	A3. The clients' and the controller's wall clocks agree. A clock that
//	    jumps forward and is corrected is handled: stored timestamps later
//	    than the clock are repaired (evidence is dropped, the others are
//	    clamped) with an ErrFutureTimestamp warning, and Fenced never vouches
//	    for evidence later than the asker's now. A clock that jumps back by
//	    J can make Fenced(T, now) vouch for a T up to J early; Client.Fenced
//	    also accepts Status.Covers, which compares no clocks.
//	A4. One controller acts on a host at a time (leader election), and the
//	    store's writes are compare-and-swap.
//
// Under them:
//
//   - Fenced(T, now) true ⇒ the hardware was off at some instant at or after
//     T (checked against the fake hardware's ground truth by
//     TestRebootStateMachine, with stale, flapping and unknown reads, faults,
//     jumping clocks, second writers, crashes and restarts).
//   - For a client that takes T before writing its annotation (Client does),
//     Client.Fenced becomes true within one requeue (at most
//     Config.Precision) of the first pass with Off evidence.
//   - The host is never powered on while a keyed annotation is present in
//     the store at the time of the controller's versioned write before the
//     power-on; invalid keys (reboot.metal3.io/ with an empty or malformed
//     key) are ignored with a warning and never hold a host.
//   - The bare annotation is removed only on Off evidence later than the
//     request; no request causes two power cycles.
//   - Online=false falls back from soft to hard after Config.SoftTimeout,
//     timed from the persisted Status.OfflineSince, whatever restarts.
//
// Power-off is issued in the first pass that sees a request. Removing the
// bare annotation and powering on happen in one pass once the host is known
// off. Requests that arrive while a reboot is pending join it; one that
// arrives after the power-on starts a new reboot. A pass that changes
// nothing allocates nothing (DecideInto); Decide costs O(k log k) in the
// number of requests.
//
// Timestamps are truncated to Config.Precision (1 s, as Kubernetes stores
// them). A power-on waits until the clock has passed the latest request, so
// that LastPoweredOn is later than every request it answers.
package reboot
