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
//  1. Read the Machine (with its persisted State), its Node, the shared
//     admission record (AdmissionStore), and the host as the reboot
//     protocol answers for the current attempt's request (RequestFor; use
//     RebootAPIHosts, which asks through reboot.Client), or, when no attempt
//     is in flight, for the last attempt's (LastRequest): Host.Fenced is
//     the reboot controller's evidence that the hardware was off at or
//     after the request's T, never a power reading a BMC may echo.
//  2. Before a new remediation may start, ask the storm guard (MayStart)
//     over the whole fleet, counting admitted machines as remediating
//     (also admitted ones that are gone: their admission is kept while
//     their request may hold their host off; the Reconciler counts them
//     unhealthy in the cluster and health check, and with the
//     control-plane role, recorded with their admission
//     (Admissions.Members), and one admitted by an older record in the
//     candidate's cluster and health check as a control-plane machine;
//     and the admissions of another controller sharing the record,
//     Admissions.Others, each in place of a healthy member of the
//     candidate's cluster and health check other than the candidate,
//     whose Node it may be, so that a percentage's fleet does not grow by
//     them, each in flight with the control-plane role the other recorded,
//     Admissions.OthersControlPlane, control plane if unknown, so that one
//     control-plane machine is remediated at a time across both), and pass
//     its answer and reason as Observed.MayStart and GuardReason.
//  3. Call Decide with your controller's clock.
//  4. If Decision.Admit, add the Machine to the admission record with a
//     compare-and-swap write; then persist Decision.State (optimistic
//     concurrency); on a conflict in either, start again at 1. Then apply
//     the side effects in the order the Decision documents, and Release
//     last.
//  5. Look again after RequeueAfter, and whenever the Machine, Node or host
//     changes. A crash between any two steps is safe: the next pass repeats
//     what was not done, and never skips a step.
//
// Reconciler does this over MachineStore, NodeStore, HostStore and
// AdmissionStore. Where the machine and its node are one record of your
// own inventory (no Cluster API), implement RecordStore (three methods)
// and get both stores from Records; run with Config.OutOfService, and
// with Config.Nouns for messages in your words (server, pool, unhealthy
// flag) instead of Cluster API's. The
// Reconciler's Loop runs it in a reboot.Runner next to the reboot
// controller, waking a Machine when it changes (at once if the store is a
// MachineWatcher, or a RecordWatcher behind Records; else within
// Config.PollInterval, by one listing of all Machines per interval), and
// its Guard fences its writes by leadership.
//
// # Concurrency
//
// Admission is atomic across concurrent reconciles and processes: it goes
// through one versioned record (AdmissionStore), and a remediation starts
// only after a compare-and-swap write adds its Machine to the record the
// storm guard judged. Two reconciles that race both read version v; one
// writes v+1, the other gets ErrConflict and decides again against v+1. It
// assumes the store's compare-and-swap is linearisable (Kubernetes
// resourceVersion preconditions are), and that one Machine is not
// reconciled twice at once (work queues guarantee it). The reboot
// controller behind the hosts assumes one actor per host (leader election).
//
// A pass's side effects on the host and the Node (the reboot request and
// its removal, the Node's deletion, taint, untaint and restored metadata)
// are conditional on the view that decided them: right before each, the
// Reconciler reads the Machine again and acts only if its persisted state
// is still the one the pass decided (else ErrConflict: a leader paused
// after its state write, superseded since by another's, writes no reboot
// request of an attempt that is over). The MachineStore's Get must read
// the authority for this (the kube module's reads the API server, not a
// cache). The check and the write both run under Guard, whose context ends
// before another leader may act, and the write is made only if that
// context is still live after the check's read (so is every write the
// stores here make after a read: Records', RebootAPIHosts'), which closes the
// gap between the two for stores that do not check the context; a
// request that still lands (no Guard) is owned by no attempt and removed
// by the next pass over its Machine that removes its request (a finished
// remediation never leaves a request on a host), which a controller
// starts on the host's change; one that lands on a host the Machine
// was moved from is removed there too (State.PrevHost, and
// State.EarlierHosts after a second move): while one is set, every pass
// reads that host and removes a request of the Machine's found there,
// looking again every PollInterval, after saving when it found it
// (State.PrevHostSeen, MovedFrom.Seen; in the admission's Member too).
// Such a host may be off for that request while it is powered off after
// the Machine moved away from it (State.PrevHostSince, MovedFrom.Since:
// a retry or a new request does not move it) and not known On since
// (moveBlocked's rule); a power-off of it for which no request of the
// Machine's was found there is another's (another Machine's request, its
// owner's), not this Machine's to count. It is forgotten only once a
// pass of a remediation that is over (done, failed, or none after a
// failed one was cleared) finds no request there and the host not off
// for one found there; until then the Machine keeps its admission, so
// the storm guard counts a host such a request powered off. A second
// move keeps the host it replaces in State.EarlierHosts while it may be
// off. A Machine gone meanwhile has these hosts read alike
// (Member.PrevHost, Member.EarlierHosts): a request of its found there is
// recorded in its Member, then removed, and the admission kept while
// the host may be off for it. A State or Member without PrevHostSince (an
// earlier version's, or one a controller of that version rewrote during a
// rolling upgrade, dropping the fields it does not know) cannot say
// whether a request was found there: it is taken as found at the last
// request's time, and the host counted while it may be off after it. A
// gone Machine's Member whose recorded request has no time (a failed
// remediation cleared) reads it from the reboot controller's last
// power-on of the host that it confirmed On with no reboot pending since
// (Host.OnConfirmedAt: a power-off for any request it saw ended by
// then), or, without one, from any time (any power-off counts until the
// host is read on since); so is the host that request was written to
// (Admissions.Requests' Host), on which a late write of its may have
// landed and been removed in the pass that releases the admission. A
// request of the Machine's found on its own host after its remediation
// ended (done or failed, or none once a failed one was cleared: read on
// State.Host, the host its last request was written to, whatever HostOf
// answers now; for a Machine never remediated, on the host HostOf names)
// is recorded likewise (State.StraySeen, no later than the T the
// request's value carries: Host.RequestT, so a power-off for it before a
// pass found it is counted; a value with no T, or one ahead of the
// pass's clock, from the last known boundary: the last attempt's end or
// request, else any power-off since the host was last read on) before it
// is removed, and the Machine keeps its admission, or is admitted again,
// while that host may be off for it: the host is off already, so the
// storm guard counts it, and a new attempt of the Machine's waits for the
// storm guard meanwhile as one not admitted does (and, on another host,
// for that host to be on, failing at Timeout, as after a move). Until
// such a request is found, none reads that host for no pending reboot or
// power-off (LastRequest carries no T): a failed remediation was cleared
// only once its host was no longer held, and a reboot of the host since,
// by anyone else, does not hold the Machine back. Once the
// host is no longer off for it, an admission kept or taken for it only
// is released (unless the storm guard admits a new attempt in that same
// pass): it never admits a later attempt. A write that lands
// after a host is forgotten stays until a person removes it, and one
// that lands and is removed by another stale writer before any pass
// found it is not counted: run two writers under a Guard. State.PrevHost
// is set on every move: a new request on the new host, a retry there, or
// a new attempt after the last one ended. No reboot request is written
// while a host the Machine moved from may be off for a request of its
// found there, or holds one (the reboot controller may act on it before
// the pass removes it; one admission counts one host): a request to a new host
// (a move), or again to the same one, waits for it, and at the attempt's
// timeout the remediation fails instead of retrying, saying which host
// to power on; a new attempt after the last one ended waits for it too,
// and fails at Timeout alike.
//
// A Machine that moves to another host after its host was powered off
// for the request has its new host asked only once the old one is known
// On (moveBlocked): the reboot controller's record of a power-on is
// written before the power-on is sent, which a BMC may refuse, so it
// alone never counts. An On reading that cannot be an echo does: the
// store's own (RebootAPIHosts.Power; in the kube module,
// kube.SetRemediationPower) or the reboot controller's
// (reboot.Status.OnConfirmed, which a controller of this version writes
// once it reads the host On after its power-on). Without either (a BMC
// refusing the power-on), such a Machine's new host is never asked, and
// the attempt fails at its timeout with a message that says so. A
// remediation that is over (given up after a cancellation, failed)
// starts no new attempt, on another host or on none, by the same rule,
// keeping its admission meanwhile; it waits with a current message
// until Timeout after the Machine was first seen unhealthy again
// (State.UnhealthyAgain), then fails naming the host to power on (its
// message says that wait is the cause, not retries run out).
//
// # Retries and a flapping health checker
//
// A machine found unhealthy again less than Config.MinHealthyPeriod (1 h,
// as Cluster API's KubeadmControlPlane) after its last remediation finished
// is a retry of that remediation: attempts are counted per remediation,
// whatever waits (storm guard, RetryPeriod) came in between. So a health
// checker that re-adds its annotation right after success (a stale view)
// costs at most RetryLimit+1 power cycles before the remediation escalates
// (the Machine is deleted if a controller owner replaces it, else failed).
//
// # Guarantees, checked against ground truth by property tests
//
// A Node is deleted or tainted only on the reboot protocol's evidence that
// the hardware is off for this attempt's request (and the request still
// holds the host off); a request that went missing mid-attempt is written
// again as a new request. That evidence comes from an Off reading taken at
// least the reboot controller's StaleReads after it saw the request (30 s
// by default; less where the BMC's staleness is known, see
// reboot.Config.StaleReads), whoever powered the host on or off before it;
// keep Config.Timeout well above it. Where BMCs say Off before the
// hardware is off, the reboot controller's OffSettle must cover it
// (reboot's assumption A1): otherwise a Node can be deleted while its host
// still runs for those seconds. The property tests draw such BMCs (up to
// fake.MaxEarlyOff) and configure OffSettle for them. A host someone powers on while it is
// held is powered off again by the reboot controller
// (reboot.Client.HoldBroken tells when). At most the storm guard's limit
// of remediations, and at most one control-plane machine, are in flight at
// any instant. No remediation takes more than RetryLimit+1 power cycles.
// A remediation cancelled mid-way (before or after its Node was fenced)
// stays in flight, admitted, until the reboot controller powered the host
// on and the Node is back (or the attempt's timeout passed): it releases
// its admission only then, so a host a cancelled remediation may have
// powered off still counts against the storm guard. A cancel after the
// power-on (powering-on, waiting-for-node) is recorded too (State.Canceled):
// at the timeout the attempt gives up waiting, it never writes a new
// reboot request. A remediation that is over without its host known on
// (given up after a cancel, failed) keeps its admission while its host is
// held (Held: its request still on it, a reboot pending, or off after its
// request and not Host.PoweredOn since, unless its owner released it and
// keeps it off with no request and no reboot pending on it: Host.Offline,
// which RebootAPIHosts reports only for a host deprovisioned or
// unprovisioned (reboot.Host.Deprovisioned, Unprovisioned), never on an
// Online false reading alone, which its owner may take back; one Online
// false reading does not release a Machine's host, live or gone, whose
// reboot is still pending, with or without RebootAPIHosts.Power;
// Host.PoweredOn is never the record of a power-on alone:
// an On reading, the store's or the reboot controller's, confirms it)
// and releases it on a later pass,
// once the host is on (or kept off by its owner): the storm guard still counts a host it may have
// left off, and no next remediation of that host is admitted meanwhile.
// Every end state (done, failed, cancelled, escalated) removes its reboot
// annotation from the host it was written to (no host is left off), before
// its admission is released, removes the out-of-service taint this
// remediation put on the Node (only its own), and restores the backed-up
// labels and annotations on the Node that comes back, also after the
// remediation ended; while it cannot, State.Message says so. The storm
// guard's refusal is persisted in State.Message with its arithmetic
// (percentages round down, as Cluster API does: 40% of 3 machines is 1).
//
// The host a request was written to is persisted with it (State.Host,
// before the request is written, by a HostStore that names hosts:
// Host.Name, as RebootAPIHosts does), and the request is read and removed
// there, whatever the Machine maps to later (moved, released: HostOf ""),
// in every phase: also once the remediation is over (done, failed,
// cancelled, or a failed one cleared to none), every pass reads the last
// request on State.Host and removes it there until it is gone
// (RequestFor). A Machine whose host
// changes while its request holds the old one (moved, re-provisioned)
// has that request removed first; only once it is gone is a new request
// written to the new host (also for a new remediation) and the node
// fenced again there: never two hosts held at once. Only this Machine's
// request is removed, or counts as its own (a value naming its UID):
// another Machine's request on a host it used to map to (the host
// re-used) is left alone. The Reconciler also records each request, with
// its host, in the admission record before writing it
// (Admissions.Requests), where it outlives the Machine: a Machine deleted
// mid-remediation (its State goes with it) has the request removed from
// that host, whatever HostOf answers then ("", another host, an error
// wrapping ErrNotFound), so the reboot controller powers the host on, and
// its admission released only once that host is no longer held for
// that request (Held: the request on it, a reboot pending, or off after
// the request and not powered on since, unless kept off by its owner,
// Host.Offline; read on the recorded host
// through the recorded request, RequestReader, which RebootAPIHosts is,
// since HostOf no longer answers for a deleted Machine: the same rule as
// a live Machine's); until then the pass fails (ErrHostHeld, or the
// removal's error), the admission is kept, the pass retried, and the
// storm guard counts the host. Unknown errs towards holding: a BMC that
// never reads the host On after the controller's power-on (refusing it,
// or reading Transitioning for ever) keeps the admission until the BMC is
// fixed, or a person who checked the host is on (or kept off by its
// owner for no request of the Machine's) removes the Machine's name from
// the admission record (ErrHostHeld's message says so). A Machine admitted while it had no host,
// that wrote no request (Member.Wrote false), is released at once. A
// remediation that is over and keeps its admission (Held) records its
// last request (LastRequest) with it if it is not recorded yet, so that
// the request outlives the Machine (an escalation deletes it). The Loop's listing adds the
// admitted Machines it does not list (the kube module's controller sweeps
// the admission record), so a Machine deleted while no controller ran is
// abandoned too. An admission whose recorded request names another UID
// (the Machine deleted and one of its name created before a pass saw it
// gone) has that request removed, and is released, before the new
// Machine is looked at. (An admission record written before Requests
// existed names no request: then the host the HostStore resolves for the
// deleted Machine is asked; if it resolves none (ErrNotFound), the
// requests no existing Machine owns are removed first when the HostStore
// is a RequestFinder (the kube module's is: it leaves out the requests of
// live PowerCycleRemediations, which carry the same annotation), read and
// removed under Guard, its context checked again before each write (a
// deposed leader's stale Machine list removes nothing), one per pass,
// each recorded as the Machine's request (Admissions.Requests) before it
// is removed (one recorded as another admission's is left to that
// Machine's own pass), and the admission kept until a pass finds none
// left and the host of the last recorded one is not held for it (read
// for the T its value carries, or from the earliest if it has none or
// one ahead of the clock); a recorded request's release sweeps them
// likewise once its host is not held), else the
// admission is kept and the pass fails with ErrOrphanRequest, which says
// the fix: a host that may carry its request is never let go. A Machine
// admitted with no host, that wrote no request, never gets there.) An escalation that persisted failed but stopped
// before deleting the Machine (an error, a crash) deletes it on a later
// pass: a failed Machine with a controller owner is deleted on every pass
// while it is still there.
package remediation
