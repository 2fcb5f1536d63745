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
//     when it first observed the host off. A client's reboot is done when its
//     annotation is gone and LastPoweredOn is later than its request.
//     Status.Fenced(T) answers the fencing question: are all processes that
//     ran on the host at T guaranteed stopped?
//
// # The caller's duties
//
// Decide is a pure function of (Observed, now). To use it from your own
// controller, for each host and each pass:
//
//  1. Read the host (annotations, Spec.Online, deprovisioning, Status) and
//     its power state. If the power read fails, pass power.StateUnknown.
//  2. Pass the outcome of your last power call for this host as
//     Observed.LastCall (keep it in memory; zero after a restart is fine).
//  3. Call Decide with your controller's clock.
//  4. If Decision.UpdateStatus, write Decision.Status and delete
//     Decision.RemoveAnnotations, with optimistic concurrency, in one write
//     if you can (else annotations first). On a conflict stop here and start
//     again at 1. Never write timestamps from another clock.
//  5. Make the power call Decision.Power (Off with Decision.Mode, or On),
//     and remember its outcome class (power.Classify) and time for step 2.
//  6. Run the next pass after Decision.RequeueAfter, at once after a failed
//     power call, and whenever the host changes.
//  7. Report Decision.Warnings (bad values, invalid keys, refused keys) to
//     the clients, e.g. as Kubernetes events.
//
// Reconciler does steps 1 to 6 over a HostStore and power.Controllers.
//
// # Guarantees, checked by property tests
//
// Power-off is issued in the first pass that sees a request. The host is
// never powered on while a keyed annotation remains. Removing the bare
// annotation and powering on happen in one pass once the host is observed
// off. Requests that arrive while a reboot is pending join it; one that
// arrives after the power-on starts a new reboot; no request causes two
// power cycles, whatever crashes, restarts, conflicts, power faults and
// clock jumps happen between steps.
//
// Timestamps are truncated to Config.Precision (1 s, as Kubernetes stores
// them) and never written ahead of the clock nor before a timestamp they
// must follow: a power-on waits until the clock has passed the latest
// request, even after the clock jumped backwards.
package reboot
