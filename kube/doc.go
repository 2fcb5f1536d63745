// Package kube runs rebootkit's state machines on real Kubernetes objects:
// the reboot API's annotations (reboot.metal3.io, reboot.metal3.io/{key})
// on metal3 BareMetalHosts, remediation of Cluster API Machines and their
// Nodes, and node reuse of BareMetalHosts, with controller-runtime. It is
// its own Go module (github.com/rebootkit/rebootkit/kube) so that
// importing the core stays light; its types come from
// github.com/metal3-io/baremetal-operator/apis v0.13.2 and
// sigs.k8s.io/cluster-api/api v1.14.2 (core/v1beta2), and it builds with
// sigs.k8s.io/controller-runtime v0.25.2.
//
// Stores. Every write is a JSON merge patch of only what the store
// changes, carrying the resourceVersion read (a compare-and-swap: fields
// this module does not know, and other controllers' labels, annotations
// and keys, are never written back); the API server's conflict is the
// package's ErrConflict, not-found its ErrNotFound:
//
//   - RebootHosts, a reboot.HostStore over the BareMetalHosts of a
//     namespace: the reboot annotations, spec.online, and the provisioning
//     state (deprovisioning, powering off before delete, deleting, or a
//     deletion timestamp count as deprovisioned). The reboot package's
//     Status, the fencing evidence among it, lives in a RebootRecord
//     (rebootkit.io/v1alpha1, package api/v1alpha1) of the host's name,
//     which only the controller may write: clients that ask for reboots
//     need update on BareMetalHosts and so could write any annotation.
//     Update writes the annotations first (a compare-and-swap even when
//     none changes, so that a request added since the read stops the
//     decision), then the record. A record that does not parse counts as
//     empty (no evidence), is reported, and is replaced at the next write.
//     With Informers (a manager's cache) it is a reboot.HostWatcher: a
//     reboot.Client's waits answer when the host or its record changes.
//   - Machines, a remediation.MachineStore over Cluster API Machines (the
//     remediation mark, control-plane label, controller owner, nodeRef,
//     cluster and MachineHealthCheck; the State in an annotation saved
//     with compare-and-swap), and HostOfMachine (the BareMetalHost whose
//     consumerRef is the Machine's Metal3Machine; "" if none).
//   - Nodes, a remediation.NodeStore over core Nodes (readiness, the
//     out-of-service taint, labels and annotations added only where
//     missing, deletion with the observed UID as a precondition), every
//     change retried from a fresh read on a conflict; Admissions, the
//     remediation storm guard's shared record as a compare-and-swap on one
//     ConfigMap (rebootkit-remediation-admissions), one section for the
//     Machine-annotation remediation and one for the
//     PowerCycleRemediations (Section: its names, requests and
//     Admissions.Members under keys of its own): each controller writes
//     its own and reads the other's as remediation.Admissions.Others, so
//     the limit and the lock per host (ErrHostHeld) hold across both. The
//     lock refuses a write that adds a remediation of a held host or moves
//     an entry onto one; an entry the write leaves as it was (whose
//     Machine's mapping may have drifted since it was admitted) never
//     blocks the others' admissions, releases and records.
//   - ReuseHosts, a nodereuse.HostStore over BareMetalHosts (reuse label,
//     provisioning state, consumer reference, deletion, error, paused or
//     detached, capm3.metal3.io/unhealthy, failure domain); claims and
//     label changes carry the resourceVersion listed, so two machines
//     never get one host.
//
// Controllers:
//
//   - RebootController: watches BareMetalHosts with a predicate that
//     passes annotation-only updates (they do not bump the generation, so
//     GenerationChangedPredicate alone would never see a reboot request),
//     requeues when the decision asks, retries on a conflict after 1 ms,
//     doubling with each conflict in a row on the host up to 5 s (a
//     RebootConflict event at the eighth in a row, naming the fix), and
//     turns the decisions' warnings and corrupt records into events.
//   - RemediationController and NewRemediationReconciler: the remediation
//     Reconciler on the namespace's Machines with the stores above; run it
//     with the RebootController of this version (the hosts' power goes
//     through the reboot API, and it confirms each power-on by an On
//     reading in reboot.Status.OnConfirmed: a host counts as on again,
//     gives its admission back or lets its moved Machine's new host be
//     asked, only on that confirmation, never on the record of the
//     power-on alone); SetRemediationPower (rebootkit-controller calls it
//     with the reboot controller's power controllers) has the remediation
//     read the power itself instead. A Machine that moves to another host
//     after its host was powered off for the request has its new host
//     asked only once the old one is known On, and without that its
//     remediation fails at its timeout (the message names
//     SetRemediationPower and Status.OnConfirmed). A Machine whose host is gone waits for it until the attempt's
//     timeout, then escalates. Hosts carrying the remediation's reboot
//     request are watched and mapped to their Machine (through the host's
//     consumerRef), so a request no attempt owns (a superseded leader's
//     write) is removed at once. The binary runs it under the LeaseGuard
//     (remediation.Reconciler.Guard) and has Machines.Reader read the
//     Machine from the API server: each side effect first checks that the
//     persisted attempt is still the one that decided it. The hosts are
//     read with that same reader (RebootHosts.Reader,
//     OperatorHosts.Reader): a caller whose client reads a cache must set
//     Machines.Reader to the manager's API reader, for a cache may not
//     yet show the request the last pass wrote, and a deleted Machine's
//     request removal (a compare-and-swap on the version read) and held
//     check would then find nothing, release its admission and leave the
//     request on the host for good.
//   - ExternalRemediationController: the same phased power-cycle for
//     PowerCycleRemediations (api/v1alpha1), the external remediation
//     objects Cluster API's MachineHealthCheck and medik8s's
//     NodeHealthCheck create from a PowerCycleRemediationTemplate; the
//     store is ExternalRemediations (one remediation per Machine or Node,
//     its state in its status, the conditions the checkers read). The
//     host, its Node, that Node's control-plane role and where the Node
//     came from (the owning Machine by name and UID, or the Node the
//     checker named) are found once and recorded in the status (host,
//     nodeName, controlPlane, source); a checker that later names
//     another source (another owning Machine, or the node-name
//     annotation instead of one) or another Node cancels the
//     remediation, and rebootkit never acts on that Node; the Node of a
//     Machine that had none when its host was found is read later from
//     the recorded Machine (same name and UID) only. A hostMapping.hosts
//     entry (the checker role writes the spec) is used only where a
//     source the checker cannot write confirms it: the host's annotation
//     naming the Node or the Node's label naming the host, under a known
//     key, or the controller owner's own map (the controller's Hosts, the
//     binary's --hosts); otherwise the remediation fails with NoHost,
//     saying so. The host a hostMapping or the controller's map finds (a
//     hosts entry, or the hostAnnotation or label lookup) is refused if, under any
//     known key, the host's own annotation names another Node, another
//     host's names this Node, or the Node's label names another host;
//     the known keys never depend on the remediation's spec alone (the
//     checker role writes it): DefaultHostAnnotation (rebootkit.io/node)
//     and DefaultHostLabel (node-restriction.kubernetes.io/baremetalhost)
//     always, the controller's HostAnnotations and HostLabels, and the
//     spec's keys, which only add checks. One
//     remediation holds a host at a time (ErrHostHeld), a
//     PowerCycleRemediation or a Machine-annotation remediation alike
//     (the admission record both share, Admissions); the storm guard
//     counts them all, the Machine-annotation remediation's admissions
//     included (with the control-plane role each section records: one
//     control-plane host at a time across both; an admission without it
//     counts as control plane), against the cluster's Nodes (a
//     remediation whose Node is gone counts, as unhealthy, while it still
//     needs remediation, as Cluster API's NodeNotFound, and with no
//     Machine to read its role from as control plane; otherwise only
//     while in flight or admitted), and a remediation waiting on a held host is looked at
//     every poll interval; a remediation
//     deleted or timed out mid-way releases its host before it goes
//     (ReleaseFinalizer). One that failed or was cancelled while its host
//     is held (remediation.Held) keeps Processing True, its finalizer and
//     its admission (the per-host lock and the storm guard's count) until
//     the host is known on; one whose checker deleted it, gone while its
//     host is held, keeps its admission and is looked at every poll
//     interval, and at start and every SweepEvery the external section of
//     the record is swept for admitted remediations that no longer exist
//     (Sweep), so a restart loses none. A soft remediation records its
//     request's host with its admission as a hard one does (the lock
//     across both controllers reads it), and a gone remediation whose
//     record names no request keeps its admission
//     (remediation.ErrOrphanRequest): it never lists, nor removes, the
//     Machine remediation's requests. Admissions an earlier version kept
//     in ExternalAdmissionsName are moved into the shared record once
//     (marked there in the same write), never admitted again after their
//     release, and each moved gets a pass at once; until they are moved,
//     every read of the shared record counts them as the other
//     section's holders (remediation.Admissions.Others: the storm guard
//     of both controllers counts them, the lock per host holds their
//     hosts), also in a binary without the external controller. The binary runs it under the LeaseGuard
//     (ExternalRemediationController.Guard) and reads the remediation
//     from the API server (Reader) to check the persisted attempt before
//     each side effect; the hosts are read with it too, for the same
//     reason as the Machine remediation's.
//   - Powers: a power.Controller per host from its spec.bmc address (the
//     Redfish family or IPMI, ParseBMCAddress) and credentials Secret, read
//     directly with get (never through a cache) and used only if it is
//     bound to the host (BMCHostLabel or an owner reference to the host).
//     While a reboot is pending, the host's RebootRecord pins the
//     spec.bmc (address, credentials Secret, TLS verification) seen when
//     it became pending; a different one gets no credentials and gives no
//     evidence (ErrBMCChanged) unless the reboot-client admission policy
//     (config/admission, AdmissionPolicyName) and its denying binding
//     have been in force since before the reboot became pending, so that
//     only an identity with more than the reboot-client role changed it.
//     "In force" (PolicyInForce) means of config/admission's shape,
//     compared with the manifest embedded in the binary: the same
//     validations, variables, matchConditions and matchConstraints,
//     failurePolicy Fail, no paramKind, and a binding with no paramRef,
//     no matchResources narrowing it (it covers every namespace) and
//     validationActions exactly Deny. "Since" is the creationTimestamp of
//     both, and only while both are as created (metadata.generation 1):
//     a policy or binding whose spec was edited (a binding rolled out
//     with Warn and switched to Deny) is in force from now only, so no
//     BMC change made before is trusted on its word until config/admission
//     is deleted and applied again.
//     When the pass finds the requests gone and spec.bmc no longer the
//     pinned one (the policy not in force: a reboot client may have
//     removed its request and redirected the BMC in one write), it first
//     reads the power of the pinned BMC (the host's when the reboot became
//     pending, so its credentials go nowhere new). If that reads Off (the
//     withdrawn reboot may have powered the host off), the record is
//     marked with the power-on it owes through that pinned BMC
//     (RebootRecordSpec.PowerOnThrough, written before any call), never
//     through the new one (which a reboot client could otherwise reach by
//     holding the host off with a request of its own and then
//     withdrawing it and redirecting spec.bmc in one write). That
//     power-on follows the reboot package's rule: it is made only while
//     spec.online is true, the host is not being deprovisioned and it
//     carries no request (an administrator who sets spec.online false,
//     withdraws the hold and replaces the BMC keeps the host off). It runs
//     in the background: each attempt waits StaleReads (for a write made
//     with the mark in view to land), then sends its On through the
//     pinned BMC's power.CheckedOner: after the BMC's last answer before
//     the command (a login if one is needed, and the state read, each of
//     which a slow BMC may take up to the pool's CallTimeout to answer),
//     the host and its record are read again, uncached, and the On is
//     sent only if the record still owes that power-on, the mark still
//     stands, the host is the same one, it is still rebootkit's
//     (Powers.Ownership, set to the RebootController's, by Ownership.Ours;
//     unset, a host with the detached annotation or an operationalStatus
//     must be detached; the same rule is checked when an attempt begins)
//     and that rule still holds (else
//     the attempt ends unsent and the next pass's BMCChanged event says
//     why), and only once the record says so: RebootRecordSpec.PowerOnSent
//     (when, and Until: the call's deadline, the latest instant the On may
//     reach the BMC, plus TaskLimit, for an On the BMC accepts for later)
//     is written, the whole booking replaced, in a compare-and-swap on the
//     record just read, so a write of the record since is seen, and only
//     while that record shows no booking that still holds the host (the
//     normal path's rule, shared: a booking whose command may still land,
//     or whose task was not read ended, is never written over, whoever
//     made it, and no attempt starts while one holds the host); a write of the host
//     landing between its reading and the On (the record's write and the
//     command, no answer of the BMC's between them) is not. An On sent
//     again after an answer (a POST refused for its session and posted
//     again after the re-login; for IPMI, one sent again on a new
//     session) is checked again, after that answer, just before it. It is retried by
//     later passes,
//     with back-off (1 s doubling to 1 min; the host is requeued within IdlePoll, and
//     through Powers.Done), until a power reading through the pinned BMC
//     begun StaleReads after the call reads On; then PowerOnThrough is
//     removed. The BMCChanged event says which of these happened (left
//     off and why, under way, failed and when it is retried, powered on).
//     Restoring or accepting the BMC removes PowerOnThrough and keeps
//     PowerOnSent: the reboot package then powers the host as
//     spec.online says, but only once an attempt still running in this
//     process has ended and, if its On may have been sent, StaleReads
//     after its end (kept in memory); if the BMC accepted the On for
//     later (a Redfish 202 Accepted, a task: power.Queued), the attempt
//     goes on until the task monitor the 202 named says the task ended
//     or the host reads On through the pinned BMC (read every 500 ms, for
//     at most Powers.TaskLimit, default DefaultTaskLimit, 10 min), and
//     the record says so first (PowerOnSent.Task, its Until moved to the
//     end of that wait); and once
//     StaleReads have passed since the Until of the PowerOnSent the
//     record shows, or since its Returned if it has one (written by
//     the sending controller once the call returned with the BMC's
//     answer that the On was carried out or refused, or once the task
//     of an On accepted for later was seen to end or the host read On; a
//     call with no answer writes none, and moves Until to the reboot
//     package's LostLanding after its return; one stamped before the booking's
//     At is an earlier booking's and is ignored, and each booking
//     replaces the whole PowerOnSent, so that none keeps an earlier one's
//     Returned or Task) (kept in the record, so a restarted controller or a
//     new leader waits as well, StaleReads being its own): until then the pass gets ErrInFlight and
//     the host is sent nothing and no evidence is taken from it. The same
//     waits hold for a host deleted and created again under the same
//     name: the one in memory as long as the process that sent the On
//     runs, the record's as long as the earlier host's record is there
//     (it is replaced only once that wait is over). The record has the
//     host as owner, so Kubernetes' garbage collector deletes it with the
//     host: a host created again after that, seen by a controller that
//     restarted since the On was sent, is not covered, nor a host whose
//     record was deleted by hand. An On the BMC accepted for later whose
//     task was not seen to end within TaskLimit, nor the host to read On,
//     leaves the host as it is (the pass gets ErrTaskOverdue,
//     also ErrInFlight, and a PowerTaskOverdue event that names the task
//     and the fix: once it ended or was cancelled on the BMC, remove the
//     record's PowerOnSent), and the owed power-on is not tried again,
//     by any replica, until that task is read ended or the PowerOnSent
//     removed (then the process whose attempt it was tries it again, as
//     after any failed attempt, StaleReads after the stamp): past the booking's Until, any replica
//     that finds it (the sender may be gone) reads the task monitor the
//     record names itself, in the background (a pass waits for it at
//     most 250 ms; at most one reading every 30 s), through the pool and
//     only through a BMC the record trusts with its credentials and TLS
//     setting for that address (its pin, the power-on it owes, its mark,
//     its LastBMC; none: not read), the monitor taken as hostile
//     (power.TaskReader); a Task with a final TaskState, the command's
//     own outcome, or a 404 or 410 (no such task: read TaskLimit after
//     the 202, it no longer runs) stamps the booking Returned, and the
//     host is acted on StaleReads later. The wait assumes that a BMC carries out an
//     On it answered with anything but a 202, if ever, before the call's
//     deadline, and one that got no answer within the reboot package's
//     LostLanding after the call returned (a sender that stops before that
//     write leaves the booking's Until, the deadline plus TaskLimit, as
//     does a 202 whose record write, Task, failed); the sending replica's clock is trusted
//     (Until is its time). In either case the pin goes and the record is marked
//     BMCChanged, with no call to the new BMC, until an administrator
//     accepts it or spec.bmc is restored.
//     That reading runs in the background (a pass waits for it at
//     most 250 ms and is requeued while it runs, and at its end through
//     Powers.Done, so a dead old BMC holds no reconcile worker). An Off
//     counts only by the reboot package's evidence rule: the reading
//     began at least StaleReads (Powers.StaleReads, default 30 s) after
//     the later of the pass that first found the requests gone with the
//     BMC changed (this process's monotonic clock) and the last power
//     command the record shows (the normal path's last power-on or press,
//     the reset path's last command), so that it cannot echo the host off
//     from before a power-on. With Async, no pass of such a host (normal
//     or reset path) goes through that rule while a call of the host runs
//     in the background, nor, when its answer was lost, until the reboot
//     package's LostLanding after its return (the reset state, its
//     Sending among it, stays until then): the pass that first finds the
//     requests gone then comes after the call's return (or its lost
//     landing), and so does the StaleReads anchored at it. An earlier
//     Off is kept and the host
//     requeued (ErrInFlight, and again through Powers.Done at that
//     instant), to be read again then (any other reading counts at once:
//     not known off). An Off that ends after its pass stopped
//     waiting is acted on only if the reading began at most 2 s before
//     the pass that uses it (the host may have been powered on since):
//     an older Off starts one fresh reading, and if that one's Off also
//     comes too late the pinned BMC is taken for not reading Off. A
//     deleted host's reading is dropped, and Powers.Close cancels those
//     still running. Otherwise the pin is dropped with no call to the new BMC and
//     the record marked (RebootRecordSpec.BMCChanged, the old pin): while
//     the mark stands and spec.bmc is not the BMC it names, every pass of
//     the host, request or not, fails with ErrBMCChanged (a BMCChanged
//     event that says the fix), so no credentials reach the new BMC and no
//     evidence comes from it, and a request made again (a remediation
//     asks again for the same attempt) is never fenced by it. An identity
//     with more than the reboot-client role accepts the new BMC by naming
//     it in spec.bmcChanged (address, credentialsName; the BMCChanged
//     event gives the kubectl command; reboot clients may not write
//     RebootRecords: config/rbac). When spec.bmc is the BMC the mark names
//     (restored, or accepted), the mark becomes the pin again in one
//     compare-and-swap write, so a pending reboot is never left without
//     its pin. A pending reboot whose pin is missing (removed with the
//     mark, or a record of a version without pins) is never pinned
//     afresh, which would pin whatever spec.bmc a reboot client put in
//     meanwhile: the record is marked with a mark that names no BMC, until
//     one is named in it. The reset path (spec.disablePowerOff) pins its
//     own request, but keeps the pin of a reboot the normal path still
//     has pending (set spec.disablePowerOff during a pending reboot and
//     clear it again, and that reboot keeps its pin: no mark) while the
//     host carries a request. Once it carries none (the reset path
//     answered the request, or its clients withdrew it; the normal path,
//     which would end that reboot, never runs on such a host), a pass of
//     the reset path whose host's spec.bmc is still the pinned one ends
//     that reboot in the record's status (its pending reboot and requests
//     cleared as the reboot package clears them, the fencing evidence
//     kept) and drops its pin, in one compare-and-swap write, before
//     anything else; a spec.bmc changed meanwhile keeps the pin, and is
//     judged as above: once checkPin lets a pass of the reset path use it
//     (the pinned BMC read Off, or the policy), that pass's record write
//     (before its power-on is sent) ends the reboot in the same way and
//     drops its pin. A host is thus never left off by the pin of a reboot
//     no longer asked for, nor handed to a BMC a reboot client put in
//     during one. With no reboot pending the record keeps a standing pin,
//     RebootRecordSpec.LastBMC: the spec.bmc of the last record write of
//     a pass that was let use it (or, on a record without one, the
//     spec.bmc first seen then). A spec.bmc other than LastBMC is used only
//     if the admission policy has been in force since PolicySettle before
//     LastBMC was recorded; otherwise the record is marked BMCChanged with
//     LastBMC, with no call to either BMC, and the host is not acted on
//     until the mark is accepted or spec.bmc restored as above (the
//     reboot controller watches the mark, so an acceptance takes effect
//     at once). So a reboot client that removes a request, waits for its
//     reboot to end and only then redirects spec.bmc gets nothing from
//     the next request either; an administrator who replaces a BMC
//     without config/admission accepts it in the mark. The first pass
//     that asks Powers for a host's power controller (the first idle pass
//     after the controller starts, before any request is acted on)
//     records its spec.bmc as LastBMC in a new RebootRecord (firstSight;
//     an earlier host's record of the same name is replaced), so a host
//     never rebooted has one too. Powers writes the record and the mark
//     with Client when it can write (the manager's client); with a
//     read-only Client the pin stays instead and nothing is recorded at
//     first sight.
//     Unless WithoutAdmissionPolicy is set (the binary's
//     --without-admission-policy), Powers refuses every host
//     (ErrNoAdmissionPolicy: no credentials read or sent, no power call)
//     while the policy and a binding of the same name of config/admission's
//     shape (above) cannot be read, reading them again every PolicyRecheck (default
//     30 s); the RebootController reports it as an
//     AdmissionPolicyMissing event on the host that names the fix, and
//     looks again within a minute.
//     A host with spec.disablePowerOff is never powered off (its
//     power-off fails with ErrPowerOffDisabled): see "Hosts whose power
//     never goes off".
//   - Ownership, OperatorHosts, OwnedHosts: never two actors on one
//     host. Next to a baremetal-operator (the default), the
//     RebootController powers only hosts the operator does not manage
//     (Detached: the annotation baremetalhost.metal3.io/detached and
//     status.operationalStatus detached, see "The baremetal-operator's
//     rules"; or a label selector) and refuses the others with a
//     RebootRefused event, making no power call; the remediation drives the operator's hosts through its own
//     reboot annotation and status, as the Cluster API provider for metal3
//     does (OperatorHosts), and rebootkit's hosts through the reboot API.
//     Both name the host (remediation.Host.Name) and read, write and
//     remove a request on the host it was written to (Request.Host, the
//     persisted State.Host), whatever HostOfMachine answers later;
//     OwnedHosts picks the store by that host's ownership, reads a
//     deleted Machine's recorded request on its host
//     (remediation.RequestReader) to keep its admission while the host
//     is off, and lists the requests of every host but those of live
//     PowerCycleRemediations (remediation.RequestFinder) for a deleted
//     Machine whose admission (an old record) records none. Without an operator
//     (Ownership.NoOperator) every host is rebootkit's.
//   - RemediationController: a pass over a deleted Machine that could not
//     remove its request or release its admission returns its error (the
//     work queue retries it with a back-off); only a clean "not found" is
//     done. At start and every SweepEvery (DefaultAdmissionSweep) it
//     sweeps the admissions ConfigMap and reconciles each admitted
//     Machine that no longer exists (Sweep): one deleted while no manager
//     ran is abandoned too. A deleted Machine keeps its admission while
//     its host is held for its recorded request (remediation.ErrHostHeld,
//     read on the recorded host: OwnedHosts is a
//     remediation.RequestReader).
//   - LeaseGuard: leadership as a fence for power calls. It is the
//     manager's leader-election lock and notes when each renewal was sent;
//     its wrapped power controllers power on or off only while the lease
//     is held with a margin, each call bounded by the lease's end, so a
//     leader paused across its lease's expiry makes no power call after a
//     new leader acts. It watches its Lease too: deleted or held by
//     another (by hand), the lease is lost within the watch's latency.
//   - RebootController reconciles hosts concurrently
//     (MaxConcurrentReconciles) with a deadline per pass, and Powers goes
//     through a power.Pool. With Async (as the binary runs it) every BMC
//     call, a login included, runs in the background, one per host, and a
//     pass waits for it at most Async.Wait: a hung BMC holds no worker, so
//     a fencing request on a healthy host is served whatever the number of
//     hung BMCs; the call's end reconciles its host again, and a power
//     call's late answer (a hard power-off unsupported) is recorded by that
//     pass (reboot.LateAnswerer). A power command the BMC accepted for
//     later (power.Queued: a Redfish 202 Accepted and its task; the
//     normal path's, the reset path's, remediation's and external
//     remediation's alike) is in flight until its task monitor says the
//     task ended or the host reads the state the command was for
//     (a restart: until the task ended), read every Async.TaskPoll:
//     meanwhile the host is sent nothing (but a power-off that is no
//     press of the power button, the hard fallback of an ignored
//     graceful shutdown, goes out beside a pending power-off that is no
//     press either) and no evidence is taken from it, and its answer is
//     handed over (LateAnswer) only then. Past Async.TaskLimit (default
//     DefaultTaskLimit, 10 min) its answer counts as lost (Settled: the
//     reboot package's LostLanding) and is not handed over, and after a
//     power-on, a restart or a press of the power button (a toggle) the
//     host is left as it is, every call of it refused with ErrTaskOverdue (also
//     ErrInFlight) and a PowerTaskOverdue event that names the task and
//     the fix, until the host's record no longer shows its booking
//     unended (its task read ended, by any replica: stamped Returned, as
//     below; or the booking removed), or, for a command no booking
//     records, until the controller restarts. A command through Async
//     that may power the host on (a power-on, a restart, a press) is
//     also written to the host's reboot record before it is sent
//     (spec.powerOnSent, the whole booking replaced, Until the call's
//     deadline plus TaskLimit, in a compare-and-swap on the record read,
//     and only while the record shows no other booking holding the host;
//     a write that fails sends nothing: the call fails with
//     power.ErrNotSent; a host without a record, or a Client that
//     cannot write, records nothing), so that a sender that stops
//     between the BMC's answer and its next write leaves the host held;
//     then, once the answer comes, removed if the BMC carried the command
//     out or refused it (or it was never sent), shortened to the reboot
//     package's LostLanding (for Powers.LostLanding and SoftTimeout)
//     after a call with no answer, or, after a 202, given its task with
//     Until TaskLimit after the answer, and stamped Returned when its task is seen to end:
//     every replica's Powers.Controller (a restarted controller, a new
//     leader) holds such a host, sending it nothing and taking no
//     evidence from it (ErrInFlight), until StaleReads after that stamp,
//     or after Until with none; past Until with a task and no stamp the
//     replica reads the task monitor itself, as for the pinned path
//     above, and holds the host (ErrTaskOverdue, with a PowerTaskOverdue
//     event) until it reads the task ended or gone. A power-off that is
//     no press is not written: carried out late, it powers nothing on.
//   - cmd/rebootkit-controller: a manager binary running both controllers
//     (kubeconfig, namespace, leader election on by default with the
//     LeaseGuard, BMC CA and call bounds, concurrency, storm-guard limit),
//     with liveness (/healthz) and readiness (/readyz: informers synced)
//     probes. Without the Cluster API CRDs it runs the reboot controller,
//     says that the remediation waits, and restarts once they are served.
//
// Deployment: config/ holds the RebootRecord and
// PowerCycleRemediation(Template) CRDs, an aggregated ClusterRole that
// lets Cluster API's and NodeHealthCheck's service accounts create and
// delete remediations (config/rbac/external_remediation_checker_role.yaml),
// samples of a MachineHealthCheck and a NodeHealthCheck using rebootkit
// (config/samples), the controller's role generated from the
// +kubebuilder:rbac markers of rbac.go and externalremediationrbac.go (a Role in the
// hosts' namespace, a ClusterRole for Nodes and, by name, the admission
// policy; Nodes and the admissions ConfigMap are read by name, never listed
// or watched: run the manager with UncachedObjects uncached, as the binary
// does, and a test applies the rendered config/ and runs the binary under
// its ServiceAccount's token with no forbidden call), a role for reboot clients (update on BareMetalHosts, read on
// records, and the marker verb "reboot" on rebootkit.io/rebootclients), the
// ValidatingAdmissionPolicy under which a holder of that marker may change
// nothing of a host but the reboot annotations unless it also has the verb
// "configure" on the host (config/admission), a Deployment (two replicas
// never on one host, probes) with a PodDisruptionBudget, and
// kustomizations (kubectl apply -k config/default, which sets the image);
// Dockerfile builds the image. scripts/gen-config.sh regenerates what is generated.
//
// # The baremetal-operator's rules
//
// What this package relies on, from the baremetal-operator v0.13.2
// (controllers/metal3.io/host_state_machine.go and
// baremetalhost_controller.go):
//
//   - checkDetachedHost runs before every state's handler: with the
//     annotation baremetalhost.metal3.io/detached, and only in the
//     provisioned, externally provisioned, ready and available states, it
//     calls detachHost; in any other state (registering, inspecting,
//     preparing, provisioning, deprovisioning...) the annotation is
//     ignored and the operator goes on powering the host through Ironic.
//   - detachHost asks the provisioner to detach (Ironic deletes its node)
//     and, while that is in progress (Dirty), returns without changing the
//     status; only when it is done does it set status.operationalStatus
//     to "detached" (SetOperationalStatus(OperationalStatusDetached)),
//     then polls slowly. So the annotation alone does not mean the
//     operator let go: Detached requires both.
//   - Without the annotation, checkDetachedHost sets a detached host's
//     operationalStatus back to OK (or error) and the operator registers
//     it again and powers it: the status alone does not mean it either.
//     A host stops being rebootkit's the moment its annotation goes.
//     So every power command of a pass (and of the background calls
//     Async runs for it) is watched: the RebootController reads the
//     host again, uncached (its APIReader), when the pass and each
//     Async call start and every 250 ms while they run, and once it is no longer
//     rebootkit's (Ownership.Ours) the command's context is cancelled
//     (ErrNotOurs): one not yet sent is not sent. A command may still go
//     out for as long as it takes to see the change: up to 250 ms plus
//     one read's time (a read is bounded by 10 s, and the next starts
//     when it ends), and a command already on the wire is not recalled
//     (TestReview39ad_OwnerWatchWindowIsReadLatencyNot250ms, kept on the
//     reviewer's branch m39c: the window it measures is this one).
//   - The operator writes status (status.poweredOn, lastUpdated) only when
//     something changes, and its power reading comes from Ironic's cached
//     power state (synced about every 60 s). So OperatorHosts takes
//     status.poweredOn, whenever written, as a reading up to StaleReads
//     old (DefaultOperatorStaleReads): a host shown off is fenced once
//     that long has passed since the request, also when the operator
//     showed it off before the request and writes nothing new. The
//     host is held for the request (remediation.Held: a live Machine's
//     remediation that is over, and a deleted Machine's admission, are
//     kept) until the operator shows it on in a status that cannot echo
//     the state from before the request: status.poweredOn false written after the request, or read
//     more than StaleReads after it, is Host.OffAfterRequest; a reading
//     that cannot show the host on since the request (written before it
//     and read within StaleReads of it, or status.poweredOn true written
//     within StaleReads after it, which may echo Ironic's cached state
//     from before the request, and read within StaleReads of it) is
//     Host.RebootPending. Only status.poweredOn true written, or read,
//     more than StaleReads after the request is Host.PoweredOn. A host
//     with spec.online false, no request of the Machine's on it, and
//     provisioning state available (its owner released it: Cluster API's
//     metal3 provider clears the consumer and sets spec.online false, the
//     operator deprovisions it and keeps it off) is Host.Offline and not
//     held, unless Host.RebootPending: the operator powers it on for no
//     request. spec.online false on a host still provisioned is not
//     Offline: its owner may set it back (a blip), and the host, off for
//     the request, stays held until it is shown on.
//
// # Hosts whose power never goes off
//
// spec.disablePowerOff marks a host whose BMC may be reachable only while
// the host runs (NC-SI). The baremetal-operator v0.13.2 never powers such
// a host off: its provisioner's PowerOff asks Ironic for a reboot instead
// (pkg/provisioner/ironic: Rebooting, or SoftRebooting for a soft one),
// manageHostPower then removes the bare reboot annotation at once,
// actionPowerOffBeforeDeleting skips the power-off, and its webhook
// refuses spec.online false with the field (validatePowerStatus). The
// RebootController, for such a host of rebootkit's:
//
//   - does the bare reboot.metal3.io request with a reset through the
//     host's power.Controller (power.Resetter: Redfish ForceRestart, IPMI
//     hard reset; always hard, whatever the mode asked: a graceful restart
//     the OS may ignore could never be seen to have happened), sent only
//     on an On reading, its intent written to the RebootRecord
//     (ResetAnnotation, with the BMC pin) before it is sent. The request
//     is removed only when the BMC accepted the reset and the host then
//     read On at least StaleReads after that acceptance: the reading
//     cannot echo a state from before the reset (assumption A1 of the
//     reboot package), so the host came back up after it. That is a
//     stricter rule than the operator's, which removes the annotation as
//     soon as Ironic accepts the reboot. A host that reads Off StaleReads
//     after the request (or after the reset) was off after it: it is
//     powered on, and the request is done when it reads On StaleReads
//     after that power-on; it is powered on only if spec.online is true
//     and no keyed request holds it, else the request is done and the
//     host left off. The RebootRecord then carries the time in
//     LastResetAnnotation, and a Reset event says what was done. A reset
//     the BMC refused (it answered that it did not carry it out: a call
//     never sent, power.ErrNotSent, a refused login, a Pool's back-off,
//     or the Guard's refusal for leadership after the intent was written,
//     which the process that was refused records as such, while another
//     leader, which did not see it, takes it for one of unknown outcome;
//     or the BMC's answer with a status, of class busy or failed, such as
//     Redfish 409, 503 or 500 or an IPMI completion code, except a
//     gateway's 502 or 504 and IPMI 0xC3, which may hide a reset carried
//     out) does not count: it is reported with a RebootPowerError event
//     and sent again RetryDelay after the refusal, on an On reading then,
//     for as long as the BMC refuses. A reset whose outcome is unknown (a
//     timeout, an answer lost, a call still under way, a restart between
//     the write and the answer) may have been carried out; it is sent
//     again only StaleReads and RetryDelay after it was about to be sent,
//     on an On reading then, and only once: such a request may reset the
//     host twice, never three times (more only if a BMC carries out a
//     reset it answered it refused). On NC-SI hardware the
//     reset takes the BMC's port down with the host's NIC, so its answer
//     is what gets lost: after a second reset of unknown outcome the
//     controller sends no more, reports a ResetOutcomeUnknown event, and
//     waits for evidence (the BMC's late answer, an Off reading) or for a
//     person to check the host and remove the request. A BMC that cannot
//     reset (power.ErrUnsupported) is reported with a ResetUnsupported
//     event, and nothing else is done. A failed state read is reported
//     with a RebootPowerError event, and nothing is sent until a reading
//     comes. The resets and power-ons are sent under the Reconciler's
//     Guard, as the normal path's power calls are.
//   - ties the state to one request: the host carries
//     ResetRequestAnnotation, written when the request is taken, and a
//     state whose request the host does not carry is an earlier
//     request's, never this one's answer. A request removed and made
//     again while no pass saw it gone (the controller stopped, a leader
//     change, or both writes between two passes) would leave the marker
//     in place, so taking a request also sets the controller's token on
//     it: a server-side apply, as field manager rebootkit-reset-token, of
//     the request with the value it has (and of the marker), with a
//     compare-and-swap on the version read, forcing ownership: a marker
//     another manager owns (a previous version's merge patch, a tool, or
//     a reboot client that rewrote metadata.managedFields, which the
//     admission policy does not check) is taken over rather than refused
//     with a conflict for ever; the request's own value is unchanged by
//     the apply, so its ownership is shared, never taken. The controller then co-owns
//     the annotation in metadata.managedFields, and the API server takes
//     that ownership away when anyone removes the annotation or changes
//     its value, and keeps it through every other write (of other
//     annotations, labels, spec or status, by the request's owner or
//     anyone else). A pending state answers the host's request only while
//     the marker is its own, the value is the one taken and the token is
//     on the annotation: a request removed and made again, in the same
//     second or not, starts afresh with resets of its own, and a busy
//     writer of the host changes nothing. A request that only the token
//     still owns was withdrawn by its owner's server-side apply (which
//     leaves a field another manager owns): it counts as removed, and the
//     controller removes it. A client that changes the request's value
//     with a server-side apply needs --force-conflicts (the token owns the
//     field). A record's Resets are per request: a client that removes
//     and makes the request again in a loop (or wipes managedFields) asks
//     for a reset each time, as it could with any new request; a client
//     that forges the token's managedFields entry as its own costs at most
//     one more reset, after which the request is answered. Because any
//     writer of the host can write that entry, nothing is applied as
//     rebootkit-reset-token (an apply removes every field its entry alone
//     owned) until the entry read owns nothing but the request and the
//     marker, with a compare-and-swap on that read: a forged entry that
//     claims more (labels, the detached annotation, spec.online) is
//     removed by itself (a JSON patch of metadata.managedFields that tests
//     the version and the entry), never applied through, and the fields it
//     claimed stay. When a
//     request is done, the state is written first (marked done, with
//     LastResetAnnotation), then the request and its marker are removed
//     in one write: a stop in between leaves a request whose state says
//     done, which the next pass removes with nothing sent; the pass that
//     sees no request clears the state and its BMC pin with no BMC call
//     when spec.bmc is still the pinned one; otherwise that pass first
//     goes through checkPin's rule for withdrawn requests (see Powers:
//     the pinned BMC is read; an Off powers the host back on through it;
//     either way the record is marked BMCChanged until an administrator
//     accepts the new BMC), so that a reboot client that
//     removes its request and redirects spec.bmc in one write gets no
//     credentials sent to its BMC.
//     When spec.disablePowerOff is cleared, the state and the token are
//     cleared before the normal path takes the host.
//   - with no request, makes power follow spec.online true as the normal
//     path does: a host that reads Off, with no keyed request, is powered
//     on (again at most every StaleReads), so that a host held off before
//     spec.disablePowerOff was set comes back when its hold is removed.
//   - refuses with a PowerOffRefused event (once per set) its keyed
//     reboot.metal3.io/{key} requests, which ask for a hold off, and
//     spec.online false: no power call is made for them, and only their
//     owner removes a keyed request. So the remediation never gets such a
//     host fenced (it escalates when its attempt times out, as for any
//     host that cannot be fenced), and a fencing agent waits in vain;
//   - never writes fencing evidence for it. A reset restarts the host
//     without its power going off; a reset host is never "fenced"
//     (reboot.Status.Fenced stays false), whatever the reset stopped.
//     Evidence the normal path wrote before spec.disablePowerOff was set
//     (a hold off) is watched: while no broken hold follows it the host's
//     power is read every PollInterval, and an On reading records
//     Status.HoldBroken (once per evidence, with a HoldBroken event), as
//     the normal path does, so that the remediation's view (Fenced and
//     not broken) turns false while the host runs; the host is not
//     powered off again.
//
// Tests run against a real API server (envtest with kube-apiserver
// v1.37.1 and etcd v3.7.3 built from the Go module proxy by
// scripts/build-envtest.sh) with the BareMetalHost, Machine and
// MachineHealthCheck CRDs generated from the typed APIs by
// scripts/gen-crds.sh (controller-gen v0.21.0): generated rather than
// copied so that the schemas always match the Go types this module
// compiles against. The tests install them with one more field in spec and
// status than the Go types have (a newer operator's), which every write
// must keep.
//
// Where the operator's own behaviour is the point, tests run the real
// baremetal-operator v0.13.2 beside the controller: scripts/build-bmo.sh
// builds it from the Go module proxy (cached by version, with its CRDs),
// and the tests run it out of cluster in its test mode (-test-mode: the
// fixture provisioner instead of Ironic, so it never reaches a BMC; one
// power state per process, so one process per host) against the envtest
// API server: TestRealOperatorDetach (rebootkit makes no BMC call before
// the operator reports the host detached) and TestRealOperatorEvidence
// (its status.poweredOn as a reading). They skip with a loud message when
// the binary is not built (REBOOTKIT_BMO_BIN) and fail in CI, which
// builds it. The other operator-mode tests keep a stand-in of the
// operator's power loop: they check that the operator and rebootkit never
// both power one host's hardware, which needs the operator to drive the
// same emulated hardware, and the real one in test mode drives only its
// fixture.
//
// The external remediation is tested with Cluster API's real core manager
// v1.14.2 (the release of the sigs.k8s.io/cluster-api/api this module
// pins) beside the controllers: scripts/build-capi.sh builds it from the
// Go module proxy in a throwaway module (cached by version, with its
// CRDs), and TestRealMachineHealthCheck runs it against the envtest API
// server, which is also the workload cluster its c1-kubeconfig Secret
// names, under its own generated ClusterRole plus config/rbac's checker
// role (what aggregation gives it in a cluster), with its webhooks served
// but not installed and the alpha controllers that need other CRDs off;
// it reaches the API server through a proxy that answers /version with
// v1.37.1 (the apiserver built from the module proxy reports
// v0.0.0-master, which the manager refuses). Its Cluster, Machine and
// MachineHealthCheck controllers link a Machine to its Node and create
// and delete the PowerCycleRemediation from the template themselves. It
// skips when the binary is not built (REBOOTKIT_CAPI_BIN) and fails in
// CI, which builds it. medik8s's NodeHealthCheck is not served by the
// module proxy: its side is a driver written from its code.
//
// # The caller's duties
//
//   - One active manager (leader election, on by default in the binary):
//     the reboot Reconciler must not reconcile one host from two
//     goroutines, which controller-runtime's work queue guarantees within
//     one manager only.
//   - Give the controller's service account the role of config/rbac (the
//     tests run the controllers under exactly that role), and reboot
//     clients the reboot-client role: never write access to rebootrecords
//     or to the BMC Secrets. Install config/admission: without it (and
//     without --without-admission-policy) the controller acts on no host;
//     with --unmanaged-hosts the binary refuses to start without it.
//   - Bind each BMC Secret to its host: the label BMCHostLabel with the
//     host's name, or an owner reference to the host (the
//     baremetal-operator adds one to the Secrets it manages).
//
// # Guarantees
//
//   - No store write overwrites a change it did not read, or a field it
//     does not own.
//   - A client that may ask for reboots cannot write the fencing evidence
//     or have another host's BMC credentials sent to its endpoint. With
//     config/admission installed it can change nothing of a host but the
//     reboot annotations (not spec.bmc, not labels, not the detached
//     annotation); without it, a spec.bmc changed during a pending reboot
//     is not used (ErrBMCChanged), nor after the pending reboot's requests
//     were removed in the same write, nor after that reboot ended (the
//     record's LastBMC), until an administrator names it in the record's
//     BMCChanged mark; a host whose pinned BMC reads Off after its
//     requests were removed is powered back on through that pinned BMC,
//     never through the new one. The controller runs without
//     config/admission only with --without-admission-policy
//     (Powers.WithoutAdmissionPolicy); what is weaker then: a reboot
//     client can still redirect spec.bmc of a host before the controller
//     first saw it (the first pass records the spec.bmc it finds as the
//     host's LastBMC), labels and the detached annotation stay writable
//     by reboot clients, and every legitimate BMC change (a replaced BMC)
//     needs an administrator's acceptance in the record's mark.
//   - The storm guard admits at most its limit per cluster and
//     MachineHealthCheck across concurrent reconciles and managers
//     (compare-and-swap on the Admissions record), the other
//     controller's admissions (remediation.Admissions.Others) counted in
//     the candidate's cluster and health check: with both controllers
//     running, their admissions together stay within the limit, and no
//     two hold one host.
//   - A host claimed for node reuse goes to one machine.
package kube
