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
//     (the default) asks the OS to shut down and falls back to hard
//     Config.SoftTimeout (180 s) after its first soft power-off
//     (Status.SoftSince; one the controller's own waits hold back, while
//     a press whose answer was lost may still land or an earlier press's
//     shutdown may still run, see A5, is tried soft first, up to
//     LostLanding + SoftTimeout + StaleReads late; one the readings keep
//     from going out, after SoftTimeout from the request), at
//     once if the BMC cannot do soft, and when
//     it fails (a soft power-off decided for this reboot, Decision.For
//     given to Call.For: one decided for an earlier reboot or Online=false
//     enforcement, even one begun in the same second (Status.Works
//     numbers the works), does not count and is not waited on
//     (RetryDelay) before this work's power-off, even if its failure is
//     answered late,
//     nor does a late answer of a call whose work is unknown, one that may
//     have been made before a restart, a new Tracker or a Forget; no time
//     is compared). Hard wins over soft across all clients, also mid-shutdown.
//     A BMC that answers a hard power-off unsupported (no ForceOff) gets
//     it soft, the only power-off it offers, with an ErrNoHardPowerOff
//     warning (a Kubernetes event), hard being asked again every
//     Config.ReissueAfter (Observed.HardUnsupportedAt): such a host goes
//     off, and the request is answered, only once its OS shuts down.
//     An answer that comes after its pass stopped waiting (a power
//     controller that implements LateAnswerer, as kube.Async does) is
//     recorded by the next pass; a power-off (press) or power-on it shows
//     may have been carried out counts as sent when that pass took the
//     answer (TestReview36ah_LateAnsweredPowerOnPressPressedAgainOnEcho),
//     also if the host was forgotten (Forget) since the call was made
//     (a call still running when its host is forgotten, or sent by that
//     pass after it, is recorded in the new memory: a power-off counts
//     from its return, a power-on from its sending or the Forget, the
//     later, and from its return).
//     A bad value counts as soft with a warning (note that the design
//     document's own {'mode':'hard'} is not JSON); Validate rejects it for
//     webhooks. Values are never rewritten.
//   - Status: PendingRebootSince is when the controller first saw the
//     request; LastPoweredOn when it powered the host on (decided, written
//     before the power-on is sent; not the power-on that leaves a pending
//     bare reboot pending on a BMC stuck reading Transitioning, see
//     Unknown below); OnConfirmed that LastPoweredOn again
//     once an On reading that cannot be an echo confirmed it; LastPoweredOff
//     the fencing evidence (see below). A client's reboot is done when its
//     annotation is gone and LastPoweredOn is later than its request.
//     Status.Fenced(T, now) answers the fencing question: are all processes
//     that ran on the host at T guaranteed stopped?
//   - Client is the other side: Request (a keyed annotation written after
//     taking T), Fenced / WaitFenced, Release, Done / WaitDone (the
//     power-on was decided), Up / WaitUp (the host reads on after it). Fencing
//     agents and the remediation package use it.
//
// # The caller's duties
//
// Decide is a pure function of (Observed, now). To use it from your own
// controller, for each host and each pass:
//
//  1. Read the host (annotations, Spec.Online, deprovisioning, Status), then
//     your clocks (now, and a monotonic reading), then its power state, in
//     that order: evidence from a reading is stamped no later than the
//     reading. If the power read fails, pass power.StateUnknown (null,
//     missing and Paused are unknown).
//  2. Pass what you remember (in memory; zero after a restart is always
//     safe): the outcome of your last power call for this host as
//     Observed.LastCall (with Repeats, Fails, Errors, and For the Decision.For it was
//     made for), and, on a monotonic clock,
//     Observed.QuietFor (since you last sent On to it, or since your
//     process started, or since you first read a LastPoweredOn you did
//     not write: another leader's power-on), SincePending and SinceRequest (since you first
//     knew the host's current Status.PendingRebootSince and
//     LastRequestSeen: your pass that wrote them, or your first pass that
//     read them; after a restart, since the restart, unless the value is
//     stamped later than the restart: a previous leader wrote it late),
//     OffFor (with
//     Config.OffSettle: the age of the latest reading of an unbroken run
//     of Off readings that is at least OffSettle old), and Changed (the
//     record's version is not one you read or wrote lately). Never carry a
//     monotonic reading across a restart. A Tracker per host keeps all of
//     these (and SinceOff, SincePress, PressOver, PressOverFor,
//     UnknownFor, UnsureFor, UnsureWhole, SaneFor, SinceRewrite, SinceLastRewrite,
//     HardUnsupportedAt) from
//     what you report to it: Tracker.Observe fills Observed.
//  3. Call Decide (or DecideInto, to reuse buffers) with that now.
//  4. If Decision.UpdateStatus, write Decision.Status and delete
//     Decision.RemoveAnnotations, with optimistic concurrency, in one write
//     if you can (else annotations first). On a conflict stop here and start
//     again at 1. Never write timestamps from another clock. Every power-on
//     comes with UpdateStatus: the versioned write is what makes a keyed
//     annotation added since your read stop the power-on.
//  5. Make the power call Decision.Power (Off with Decision.Mode, or On),
//     and remember its outcome class (CallClass: a refused login or a
//     Pool's back-off was not tried, and is busy) and time for step 2.
//  6. Run the next pass after Decision.RequeueAfter, at once after a failed
//     power call, and whenever the host changes.
//  7. Report Decision.Warnings (bad values, invalid keys, refused keys) to
//     the clients, e.g. as Kubernetes events.
//
// Reconciler does steps 1 to 5 over a HostStore and power.Controllers;
// Runner does step 6 for it (Reconciler.Loop), and for the remediation
// reconciler in the same process. The Runner reconciles the hosts your
// inventory lists (Loop.Keys) and forgets one dropped from it once a
// pass that read its record found no work of the controller's under way
// (Result.Busy, Next.Busy): a host dropped mid-reboot or held off is
// finished first, an idle one whose BMC is dead is forgotten (an Online
// host last read Off is owed a power-on, and is not idle until its BMC
// has read unknown for LostLanding + 2x SoftTimeout + StaleReads; a
// power-off or press of ours whose answer was lost is waited out for as
// long, since it may land late and then shut the OS down). An
// Online=false host counts as idle once it is known off (read Off by a
// reading that cannot echo, also one that was off before Online=false
// came), unless a power-on of ours decided before Online=false was never
// confirmed: whether that power-on may still land cannot be told, so
// such a host is kept, and kept off, until Online is true again or its
// record is deleted. So is a reboot pending under Online=false: once its
// power-off is known done (Status.Covers) with no request left but the
// bare annotation, it waits for Online=true (when the HostLister lists it
// again) and counts as idle, unless someone powered the held host on
// since (Status.HoldBroken: kept, and kept off, as above). A host set
// Online again while a power-off of ours may still turn it off (a soft
// one's OS shutdown: 2x SoftTimeout + StaleReads, counted on the record's
// times and on the process's monotonic clock) stays busy until it reads
// Off and is powered on, a power-on of ours follows, or that time is
// over. What this process sent, and read, it remembers on its own clock
// (also across a record deleted or wiped and created again); what a
// previous process or another leader sent it may not know at all (the
// record may have been wiped since), so for LostLanding + 2x SoftTimeout
// + StaleReads after a Reconciler's first pass, and after it begins to
// lead (a Guard's Hold succeeds after a refusal, asked by a pass or a
// HostLister listing; with a GuardTerm, a refusal while its Term still
// reads the last success's value, inside the lease's margin, does not
// count, and a success in a new Term does even with no refusal seen),
// every host it reads
// is busy (such a call may land that late and then shut the OS down) and
// a HostLister's listing adds every record it holds: a host dropped from
// the inventory then is let go only after that window. A host
// dropped while no Runner held it (the process restarted, or was
// standby) is found again only if the HostStore is a HostLister
// (fake.RebootHosts is; kube.RebootHosts and WithPrefix's store are
// not): keep such a host listed until its work is done. A Guard (Reconciler.Guard) fences every
// store write and power call by the process's leadership (assumption A4):
// etcd.Leadership.Guard and kube.LeaseGuard implement it; the Runner
// passes a host refused for leadership again after at most
// Runner.StandbyRetry (5 s), so a standby acts on a request made during a
// failover soon after it wins the lease. The
// reboottest package is the conformance kit for HostStores of your own.
// Stores whose records are not BareMetalHosts can carry the API under a
// prefix of their own (WithPrefix); metal3's stays the default.
//
// # Evidence: what an Off reading proves
//
// Real BMCs report an old power state for seconds after it changed
// (sushy-tools 1 to 11 s, iDRAC similar), report null, leave the state out,
// say Paused, and some say Off a few seconds before the hardware is off. So
// a reading is not evidence by itself:
//
//   - Unknown (an error, null, missing, Paused) proves nothing. A power
//     call that was busy or failed while the readings are unknown too (a
//     BMC that answers nothing) is tried again after RetryDelay doubled
//     with each call in a row that got no answer (a timeout, a lost
//     connection), at most an hour (Call.Fails), the BMC read every
//     PollInterval meanwhile: the first try, and one after the BMC
//     answers a reading (null included) or a call again, wait RetryDelay
//     only (TestReview36y_FenceOnDeadBMCStatusChurn,
//     TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack). A pass that
//     reads it never powers the host on (some BMCs can only toggle, and a
//     toggle sent to a host that is off powers it on); while a reboot is
//     pending, or Online=false is being enforced, it may send a power-off
//     that sets the power (ForceOff, GracefulShutdown, IPMI power down),
//     which powers nothing on (Online=false begins its enforcement on an
//     unknown or transitioning reading as on an On one, unless a
//     power-on of the controller's may still be under way: Transitioning
//     within SoftTimeout + StaleReads of its Status.LastPoweredOn (a
//     restart is no power-on), when an OS in POST hears no soft
//     power-off; an accepted soft power-off of the same work (Call.For)
//     is not repeated while the readings show nothing, an accepted hard
//     one after ReissueAfter doubled with each repeat, at most twice
//     SoftTimeout + StaleReads apart
//     (TestReview36z_OfflineNullSensorForceOffEveryMinuteForEver), until an Off reading taken StaleReads after
//     the controller's last power-off and power-on shows it done
//     (Status.OfflineOffSeen): from then on only an On reading begins a
//     new episode, soft first, and unknown or transitioning readings send
//     nothing unless they last longer than SoftTimeout + StaleReads
//     (then a hard power-off, and another twice SoftTimeout + StaleReads
//     after an accepted one, which powers nothing on, so a host powered
//     on late in a long run is powered off again within about that
//     (TestReview36z_HeldHostPoweredOnLateInLongNullRunRunsAnHour); one that failed
//     or timed out answers the run for at least RetryDelay and at most
//     SoftTimeout + StaleReads doubled with each such answer in a row
//     (Call.Errors), so
//     a dead BMC gets a few calls an hour, not one every RetryDelay; one
//     the BMC answered busy (a 409, a refused login, a Pool's back-off:
//     not carried out, and no sign of a dead BMC) for RetryDelay doubled
//     with each such answer in a row, at most ReissueAfter, whatever the
//     run's length
//     (TestReview36ab_HeldHostOnStuckTwoBusyRunsTwelveMinutes,
//     TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour;
//     TestReview36x_OfflineUnpluggedHostHammeredForEver,
//     TestReview36u_OfflineNullReadingsNeverPowerOff,
//     TestReview36v_OfflineLostHardOffNeverRepeatedOnNull,
//     TestReview36w_OfflineOffHostFlappingNullForceOffForEver,
//     TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce). A held
//     host whose readings say neither On nor Off for that long is powered
//     off hard the same way, again every twice SoftTimeout + StaleReads
//     while the run lasts (someone may power it on later in the run:
//     TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver), and its
//     Status.HoldBroken set (the evidence cannot tell whether it ran); a
//     host with Online true and no hold whose readings say Transitioning
//     for that long is powered on the same way (never on an unknown
//     reading, never by a power-on that may press the button, and never
//     before every power-off of the controller's that may have been
//     carried out is SoftTimeout + StaleReads old, Observed.SinceOff: a
//     power-on sent during an OS shutdown is accepted and does nothing,
//     and the OS then powers the host off:
//     TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver,
//     TestReview36y_OnlineBackDuringOfflineShutdownOffForEver), also when
//     no keyed request of a pending reboot is left before its evidence
//     came, which ends the reboot: every request withdrawn
//     (TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff),
//     or only a bare request (Annotation) whose latest power-off the BMC
//     accepted, when the Off reading never comes (a BMC stuck reading
//     Transitioning while the host is off), if a power-off of the reboot
//     decided on an On or Off reading was accepted (Status.OffOnSane,
//     persisted, and recorded only once the call's answer shows it
//     accepted: the run began after that reading and after a power-off
//     the BMC took; a run under way before, or a power-off refused,
//     shows nothing of it; nor while the reboot is soft and its hard
//     fallback is due (above): the hard power-off goes out first
//     (TestReview36af_SoftIgnoredBareRebootDoneWithoutPowerOff),
//     TestReview36z_BareRebootDoneWithoutPowerOff,
//     TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff; no
//     clock is compared, so a power-off repeated later in the run, a
//     restart or a step of the wall clock does not keep the host off for
//     good, TestReview36aa_BareRebootStuckPoweringOffRestartOffForEver): its annotation is removed and
//     Status.LastPoweredOn written as for a reboot done, though no Off
//     reading showed the host off, and Status.LastPoweredOff is not moved
//     (TestReview36y_BareRebootOnStuckPoweringOffOffForEver; an
//     exception to the Guarantees' "evidence covering the request",
//     below). Without OffOnSane (the run began before the power-off the
//     BMC took, the host maybe off, powered off out of band before the
//     request; or the controller restarted before a Status write carried
//     it: the pass after the call records it only with a write it makes
//     anyway), such a bare reboot is answered as
//     idle answers the run: once its latest power-off, accepted and
//     returned a Precision tick after its latest request was seen, is
//     SoftTimeout + StaleReads old, it sends a power-on that sets the
//     power (Status.StuckOnDecided, written before it; LastPoweredOn is
//     not, the reboot stays pending), sends no power-off on a reading
//     that is neither On nor Off for SoftTimeout + StaleReads after it
//     (the host in POST; a refused power-on is tried again after its
//     back-off), and, if the host reads On at any time after it, ends as
//     done (it was off: annotation removed, LastPoweredOn written, a
//     power-on that powers nothing off; no second power cycle). Only
//     persisted facts decide from then on (StuckOnDecided, StuckGaveUp),
//     never what this process knows of the power-on's answer: a restart
//     or a step of the wall clock changes nothing
//     (TestReview36ab_BareRebootAskedDuringStuckOffRunOffForEver,
//     TestReview36ab_UpgradeDuringStuckPoweringOffRunOffForEver,
//     TestReview36abFix_BareStuckOffOneCycle,
//     TestReview36ac_BareStuckClockStepForwardSecondCycle,
//     TestReview36ad_StuckRestartEachWindowCyclesForEver). If the host
//     still reads neither On nor Off once that time is over, the
//     controller cannot tell a host it power-cycled from one whose
//     power-off the BMC dropped, nor whether the power-on landed: it
//     gives up (Status.StuckGaveUp). The give-up blocks only the
//     reboot's power-off, never sent again for the request, which stays
//     pending (annotation kept, LastPoweredOn not written); on
//     Transitioning readings the power-on that sets the power is sent
//     again as idle sends it (backing off), so a dropped power-on, a
//     host powered off out of band or by Online=false and then set
//     Online again is powered on; Online=false and keyed requests act
//     as ever. Every pass that finds it given up (Online, no keyed
//     request) warns ErrStuckTransitioning for
//     the operator to fix the BMC or remove the annotation
//     (TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver,
//     TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff,
//     TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver). An On reading
//     then ends the reboot as above; an Off reading clears
//     StuckOnDecided and StuckGaveUp and the usual rules resume (the
//     evidence rules answer it).
//     Never with a keyed request present. A request that joins the
//     reboot clears OffOnSane, StuckOnDecided and StuckGaveUp: what came
//     before it says nothing of it. The run is
//     measured on the monotonic clock from its first reading, if this
//     controller read On or Off before it (Observed.UnsureWhole); a run
//     a stuck rule may act on (a reboot pending, Online false, or a
//     Transitioning reading) is persisted (Status.UnsureSince) once it
//     lasts half of SoftTimeout + StaleReads, and cleared once On or Off
//     readings have lasted StaleReads (SoftTimeout + StaleReads for a
//     host with Online true and no reboot pending), so that a controller restarted
//     during it counts it from its start (once it has itself read unsure
//     readings for half of SoftTimeout + StaleReads), and short runs
//     write nothing. A shorter spell of On or Off readings does not clear
//     it but marks it interrupted (Status.UnsureInterrupted, one write, not
//     one per spell): a restarted controller then counts only the run it
//     reads itself, and writes that anew, so that it never takes several
//     short runs of a flapping BMC for one long one and records a
//     HoldBroken on a host off all along
//     (TestReview36aa_RestartEarlyInLongerFlappingNullFalseHoldBroken). It
//     counts from UnsureSince only if the status says the run is unbroken
//     (Status.UnsureUnbroken, written with every UnsureSince): an older
//     version's status, which has no such mark, is counted from only once
//     this controller has written its own run
//     (TestReview36ab_UpgradeEarlyInLongerFlappingNullFalseHoldBroken); a
//     sane spell no controller read (while none ran) is not known. A
//     power-off that may press the power button (a Controller that
//     implements Toggler: Redfish PushPowerButton, IPMI soft shutdown) is
//     sent only on an On reading taken StaleReads after this controller's
//     previous power-on and power-off, and after the shutdown of its
//     previous press is over: Config.SoftTimeout + StaleReads after the
//     press (counted from when its call returned, or its late answer was
//     taken: the latest it may have reached the hardware, a slow BMC's
//     lock, login and state read coming first), or StaleReads after an
//     unbroken run of Off readings taken
//     StaleReads after the press returned and Config.OffSettle long (that
//     run shows the hardware off after it, as the evidence rule asks). A
//     press refused before it reached the hardware (a refused login, a
//     Pool's back-off, a call never sent (power.ErrNotSent), a refusal
//     for leadership) counts as none, also when it is the late answer of
//     one answered busy in its pass (the power-off memory goes back to
//     before the first power-off answered busy since the previous late
//     answer: TestReview36ah_LateRefusedSoftPressBlocksRetryThenCutHard);
//     one that timed out counts as sent
//     LostLanding after its return (A5), for the whole SoftTimeout.
//     A power-on that may press the power button (a Controller that
//     implements OnToggler) is sent only on an Off reading taken
//     StaleReads after this controller's previous power-on and after its
//     previous press may have landed, never while a press whose answer
//     was lost may still land (TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand);
//     a released host that reads On is sent none, its reboot ends with no
//     call (Status.LastPoweredOn written,
//     TestReview36af_ReleasedOnHostPressedOff).
//     Every press (a power-off's, and a power-on's on a Controller that
//     implements OnToggler) is recorded in Status.LastPress by a
//     versioned write before it is sent, so a restarted controller counts
//     a press as possibly in effect from its start if LastPress is set
//     (or, in a status of Status.Format 0, written before that, a
//     reboot was pending, Online=false enforced, or, on an OnToggler, a
//     LastPoweredOn is set: such a status may hide a press), or from
//     Status.ActingSince if the status bounds it so (A5), and a
//     controller that reads, in any later pass, a LastPress (or a pending
//     reboot, or an Online=false being enforced, a press too in a status
//     that may hide one) it did not write (a write
//     of its own whose answer was lost, a timeout the store applied, stays
//     its own) counts that press (power-off) as sent at that pass, never
//     earlier, and likewise a Status.LastPoweredOn (written before every
//     power-on but the one a pending bare reboot sends on a long run of
//     Transitioning readings, above, which sets the power) as a power-on (Observed.SinceOff, SincePress, PressOver,
//     QuietFor); a press or power-off counted so was not seen answered
//     and may have been lost, so it counts as sent Config.LostLanding
//     later still (A5). Another leader writes its value before it sends the
//     call, which may land until its lease ends, after the read: so a
//     controller with a Guard that does not hold the leadership (it asks
//     the Guard at the start of every pass) counts every such value it
//     reads as sent at every pass, and once it leads (the first Hold that
//     succeeds after one refused, or after its start) as sent no earlier
//     than that Hold, when the Guard promises the old leader's calls are
//     over (TestReview36_StandbyCountsOtherLeadersPressFromItsWrite,
//     TestReview36_StandbyCountsOtherLeadersPowerOnFromItsWrite; a
//     Tracker is told by Standby and Leading). A pass that read its clocks
//     before that Hold (the Reconciler runs hosts concurrently: another
//     host's pass made it meanwhile) is a standby pass too, and what it
//     reads counts as sent at that Hold
//     (TestReview36h_ConcurrentLeadDatesForeignPressBeforeHold).
//     Such a reading cannot echo a state from before a shutdown it
//     started.
//     While a reboot is pending it reads again after Config.QuickPoll
//     (1 s) for the first PollInterval of an unbroken run of unknown
//     readings, then backing off to PollInterval, so a BMC that answers
//     null for ever is not read every second; otherwise after
//     PollInterval.
//   - Transitioning and On prove the host is not known off. A
//     transitioning reading after the pending reboot's own power-off (in
//     the mode the reboot keeps) is that power-off under way: the
//     controller waits. Before one was sent it shows nothing of ours (a
//     BMC stuck reading Transitioning while the host runs): a power-off
//     that sets the power goes out as on any reading, soft ones too (so
//     SoftTimeout counts from it), and a hard one at once
//     (TestReview36u_StuckTransitioningHardRebootNeverSent,
//     TestReview36u_StuckTransitioningSoftRebootNeverFallsBackHard); a
//     soft one waits, while the last call is no power-off, only within
//     SoftTimeout + StaleReads of the controller's own power-on
//     (Status.LastPoweredOn: an OS in POST hears no soft power-off; a
//     forced one is heard, TestReview36w_HardFenceAfterPowerOnWaitsForPOST).
//     With Online true (or a reboot released), a transitioning reading
//     after an unbroken run of unknown or transitioning readings longer
//     than SoftTimeout + StaleReads shows nothing under way: a power-on
//     that powers nothing off (no OnToggler pressing) is sent, once per
//     run (TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver).
//   - Off, read at instant r, proves by assumption A1 that the hardware was
//     off at some instant in [r-StaleReads, r]. So it is evidence for a
//     request only if it was read at least Config.StaleReads (30 s) after
//     the controller first saw the request, on a monotonic clock: then it
//     cannot echo a state from before the request, whoever powered the
//     host on or off before it. An Off that may be such an echo is not
//     evidence, and the power-off is sent anyway. With Config.OffSettle,
//     the host must have read Off, without a break, for OffSettle, and the
//     reading OffSettle old is the one that counts.
//
// The evidence is kept in Status.LastPoweredOff as the (floored) instant
// StaleReads before the reading that counts, placed on the wall clock from
// the timestamp of the pass that first saw the request plus the monotonic
// time since (so a wall clock that jumps forward cannot date it late). It
// is moved forward only while a reboot is pending, and only when it comes
// to cover PendingRebootSince or the latest request (LastRequestSeen): at
// most two writes per new request, none per pass of a long hold.
//
// After a power-off command the controller reads again after QuickPoll,
// then after as long as it has been since the command (doubling), at most
// Config.PollInterval; once the reading may count, it looks again as soon
// as it counts. A hard power-off that was accepted but is contradicted by a
// later On reading is sent again, backing off from QuickPoll to
// PollInterval: a Controller may skip a power-off when its own read
// says the host is off, and that read may be an old echo. This module's
// adapters send a power-off that sets the power whatever they read
// (power/redfish: ForceOff and GracefulShutdown; power/ipmi: power down),
// and skip one that may press the button on their own reading
// (power/redfish: PushPowerButton unless it reads On, and not within
// SoftTimeout + StaleReads of its previous press, nor within its
// Config.LostLanding + SoftTimeout + StaleReads of a reset whose answer
// was lost; power/ipmi: soft
// shutdown, which some BMCs implement as a press, when it reads Off). A
// soft one is sent again after ReissueAfter while the host reads On,
// unless it may press the button (above).
//
// A held host (evidence covers every request, keyed requests or
// Online=false remain) is read every PollInterval (sooner while a run of
// unsure readings nears SoftTimeout + StaleReads). Read On, someone else
// powered it on: the controller records it in Status.HoldBroken (once per
// evidence) and powers it off again, hard whatever the reboot's mode (the
// host may sit where the power button does nothing: firmware setup, a
// boot loader, an OS that ignores ACPI; soft on a BMC that answers hard
// unsupported, as above), in the same pass (backing off as
// above if it keeps reading On; a hard power-off that may press the
// button waits as above for an On reading that cannot be an echo). Client.HoldBroken reports it. Evidence for
// earlier instants stays true. A request that joins a held host makes
// the reboot pending again until the evidence covers it: an On reading
// then, while a keyed request is present and the evidence answers the
// requests seen first, is recorded in HoldBroken too (the host is
// powered off again in the reboot's mode), so that a client told fenced
// gets the alarm though the new request's evidence later covers the
// sighting (TestReview36ab_HeldHostPoweredOnWhileSecondFenceJoinsNoHoldBroken);
// the joining clients get it as well.
//
// A request is new when its annotation and value were not among those
// seen in the last pass: only that moves LastRequestSeen, and each request
// is answered within Lag + StaleReads (+ OffSettle) + 1 s of its arrival
// whatever else writes the record. A request removed and added again with
// the same value between two passes looks like the one already seen: so
// while keyed requests are present, a record changed by someone else
// (Observed.Changed) with the requests as they were is a possible re-add,
// answered apart without delaying any other request
// (Status.RewriteSeen): StaleReads after the pass that saw it, within two
// StaleReads while a second writer never stops (one status write per such
// change, none per pass).
//
// Latency: an answer comes about Lag + StaleReads (+ OffSettle) after the
// request (Lag: the power-off's own delay), within about a second more when
// the host reads honestly, up to StaleReads more when a Controller
// skipped the power-off on an old Off echo (this module's adapters skip
// only one that may press the power button); Client.WaitFenced wakes on the store's change where
// the store can tell (HostWatcher). Choose StaleReads per BMC as Config
// explains, per host with Host.StaleReads. TestAdapterScenarios (-v)
// prints the measured table.
//
// # Guarantees, and the assumptions they rest on
//
// Assumptions:
//
//	A1. Every reading a BMC gives shows the hardware's power at some
//	    instant at most StaleReads (Config, or the host's own) before the
//	    read, or is unknown (null, missing, Paused, an error). A BMC that
//	    reports Off before the hardware is off does so for at most
//	    Config.OffSettle, and the hardware then goes off (before anyone
//	    powers it on again).
//	A2. A power.Controller's Off never powers a host on, whatever state it
//	    is in, or it says it may with Toggler (then the controller sends
//	    it only on an On reading that cannot echo a state from before its
//	    own previous power-off: a soft shutdown ends within SoftTimeout of
//	    the press, or never; an out-of-band power change within StaleReads
//	    before the press can still fool it, the limit of any BMC that
//	    reads late). Anyone
//	    may power the host on or off out of band at any time; the
//	    controller powers a held host off again as soon as a read shows it
//	    on (within PollInterval plus the read's staleness; soft on a BMC
//	    that offers no hard power-off, so off once its OS shuts down;
//	    later, up to Config.LostLanding after a press of its own whose
//	    answer was lost, which may still land and would power it on again:
//	    A5).
//	A3. The clients' and the controller's wall clocks agree. A clock that
//	    jumps forward and is corrected is handled only in part: stored
//	    timestamps later than the clock are repaired by the controller's
//	    next pass (evidence is dropped, the others are clamped) with an
//	    ErrFutureTimestamp warning, and Fenced never vouches for evidence
//	    later than the asker's now. A reboot whose power-on was decided
//	    stays done (its PendingRebootSince is moved back to stay before
//	    the clamped LastPoweredOn): its dropped evidence is not earned
//	    again by a second power cycle, whatever the clock does
//	    (TestReview36r_ClockCorrectionAfterPowerOnCyclesAgain); a reboot
//	    still pending earns it again from an Off reading, the host being
//	    off already. But evidence stamped while the clock
//	    ran J ahead is dropped only by a pass that runs before the
//	    corrected clock catches up with it: if the controller does not run
//	    in that time (it is down, or the host is not reconciled), Fenced(T,
//	    now) (and Client.Fenced) vouch for a T up to J late from then on,
//	    although the hardware may have run since T. A clock that jumps back
//	    by J can make Fenced(T, now) vouch for a T up to J early;
//	    Client.Fenced also accepts Status.Covers, which compares no clocks.
//	    A restart (or a new leader) whose wall clock runs J ahead of the
//	    one that wrote a Status.ActingSince dates the calls it bounds J
//	    early: a press whose answer was lost is counted landed up to J
//	    too soon, and a power-off sent then can leave the host off when it
//	    lands, powering a held host on (a 1 h forward jump, then a
//	    restart, 1 s after a lost soft press; reboot/testdata/review36t/
//	    README.md). The reboottest kit draws no such restart: it keeps
//	    its restarts inside this assumption (reboottest/restarts.go).
//	A4. One controller acts on a host at a time (leader election, with a
//	    Guard that fences writes and power calls by the leader's lease),
//	    and the store's writes are compare-and-swap and return the new
//	    version. During a handover the old leader may still finish a pass:
//	    its power call and write are stopped by the Guard (Reconciler.Guard;
//	    kube.LeaseGuard, etcd.Leadership.Guard), its write by the
//	    compare-and-swap if the new leader wrote the host since its read,
//	    and otherwise its timestamps count as known only from the new
//	    leader's next read, never from its start
//	    (TestIssue36LeaderHandoverLateWrite). A standby runs passes too
//	    (reads only): what its first pass read does not stop it from
//	    counting a press, power-off or power-on the old leader recorded
//	    later (TestReview36_StandbyMemoryIgnoresOtherLeadersPress,
//	    TestReview36_StandbyIgnoresOtherLeadersPowerOn).
//	A5. A BMC carries out a power call whose answer was lost (a
//	    timeout, a broken connection, a lost datagram, a call still
//	    running in the background: an error with no protocol status that
//	    is not a refusal before sending nor unsupported, or a status that
//	    says the outcome is unknown: IPMI completion codes C3h and CEh,
//	    HTTP 502 and 504, power.Error.Answered; the Redfish adapter's own
//	    lost-reset window counts them too) within
//	    Config.LostLanding (default SoftTimeout) of the call's return, or
//	    never. The controller counts such a power-off, and a press, as
//	    sent LostLanding after its return (Observed.SinceOff, SincePress),
//	    whatever the adapter does
//	    (TestReview36l_IPMILostSoftOffLandingLateThenSlowShutdown,
//	    TestReview36n_IPMITimeoutCompletionCodeIsNotAnAnswer), and so a
//	    power-on whose answer was lost on a controller whose power-on may
//	    press the power button (OnToggler): it may land on a host that
//	    runs by then and shut it down
//	    (TestReview36n_LostPowerOnPressLandsThenPressPowersHeldHostOn). An
//	    error the BMC answered (an HTTP status such as 409 busy, an IPMI
//	    completion code, unsupported) is not lost: it counts from its
//	    return (TestReview36m_AnsweredBusyPressCountsAsLost). A late
//	    answer (LateAnswerer) settles only the call in flight it is taken
//	    for, and only if it is an answer: a late answer that is itself
//	    lost counts LostLanding from when it was taken, and other lost
//	    calls stay lost (TestReview36m_LateLostAnswerClearsLostLanding).
//	    A power-off or press this controller did not see answered may
//	    have been lost too: one a previous process may have sent (counted
//	    from the start or from when it began to lead; from the first pass
//	    for a LastPress stamped after the start), one another
//	    writer recorded (from the pass that first read it), one read
//	    while standing by (from that pass, then from when it began to
//	    lead) counts as sent LostLanding after that
//	    (TestReview36m_RestartAfterLostSoftOffForgetsLostLanding,
//	    TestReview36m_SecondReconcilerTakesOverAfterLostSoftOff), also
//	    when the host is forgotten before that first pass
//	    (TestReview36n_RestartThenForgetBeforeFirstPassForgetsLostLanding).
//	    So a restarted controller, or a new leader, whose calls may press
//	    waits LostLanding longer before it sends any power-off to a host
//	    whose status shows a press (a LastPress; in a status of
//	    Status.Format 0 also a pending reboot, Online=false being enforced,
//	    or, on an OnToggler, a LastPoweredOn: TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn,
//	    TestReview36s_RollingUpgradeHandoverPowersHeldHostOn), and a
//	    power-off that presses SoftTimeout + StaleReads more (the counted
//	    press may have started a shutdown, pressWait): after an upgrade to
//	    Format 1, on a controller whose power-on may press, every host
//	    whose status shows a LastPoweredOn (the fleet) waits so, and a
//	    soft reboot asked then gets its soft power-off up to LostLanding +
//	    SoftTimeout + StaleReads after the upgrade's first pass (6m30s with
//	    the defaults), falling back to hard only
//	    SoftTimeout after it (Status.SoftSince,
//	    TestReview36t_UpgradeIdleHostSoftRebootHeldSixMinutesThenCutHard).
//	    The LastPoweredOn's date does not shorten it: it is when the
//	    power-on was decided, and nothing but the old process's end bounds
//	    when that call returned (LostLanding counts from the return);
//	    but from Status.ActingSince + Config.Precision, if the status has
//	    one (and is of Status.Format 1 or later: an older version's ActingSince bounds
//	    nothing, TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress),
//	    not from its own start or leadership: the controller writes
//	    it, while a power-off may be in effect, once every power-off and
//	    press it knows of (its own, and those it counted of others) has
//	    returned, and clears it in the versioned write before every power
//	    call, so it bounds the returns of every call the status shows.
//	    Restarts or lease hiccups at any period longer than LostLanding +
//	    SoftTimeout + StaleReads so do not put the press off for ever
//	    (TestReview36n_RestartEveryFiveMinutesNeverReboots,
//	    TestReview36o_RestartEveryThreeMinutesNeverReboots,
//	    TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots); a
//	    standby that reads it counts the calls from it, and once it leads
//	    counts what its first pass reads from then if ActingSince changed
//	    since (another leader's call). Timestamps are truncated to
//	    Precision, so ActingSince and LastPress count up to Precision
//	    later than they read (TestReview36o_ActingSinceTruncatedCountsLostPressEarly).
//	    A LastPress this controller wrote itself is never counted again
//	    as a press it did not see answered (its own lost answers count from
//	    their return), so a lease hiccup does not restart the wait
//	    (TestReview36n_LeaseHiccupEveryFiveMinutesNeverReboots).
//	    A power-on that may press whose answer was lost is a press too:
//	    Off readings taken before it may land show nothing of the
//	    shutdown it may start (TestReview36o_LostPowerOnPressSlowShutdownPressesOnEcho),
//	    and one still running in the background is settled by its late
//	    answer, counting from then
//	    (TestReview36o_LateLostPowerOnPressCountsFromPass). Such a
//	    power-on is recorded in Status.LastPress, in its versioned write
//	    before the call, like a power-off's press: a restarted controller
//	    or a new leader counts it as a press that may still land
//	    (TestReview36p_RestartForgetsLostPowerOnPress); the LastPress is
//	    cleared, as any, once no reading can echo a state from before the
//	    press's shutdown.
//	    While a press that may have been lost (or that this controller
//	    did not see answered) may still land, that is until LostLanding
//	    after it counts as returned, a controller that may press (a
//	    Toggler or OnToggler that answers yes) sends no power-off at all,
//	    not even one that sets the power: a ForceOff sent before the press
//	    lands leaves the host off, and the press then powers it on while
//	    it is held. So the hard fallback of a soft reboot (and of
//	    Online=false), and the hard power-off of a held host read on, may
//	    come up to LostLanding after a lost press's return rather than
//	    SoftTimeout after the soft power-off
//	    (TestReview36p_LostSoftPressLandsAfterHardOffPowersHeldHostOn).
//
// Under them:
//
//   - Fenced(T, now) true ⇒ the hardware was off at some instant at or after
//     T (checked against the fake hardware's ground truth by
//     TestRebootStateMachine, with stale, flapping, early-Off and unknown
//     reads, out-of-band power-ons and power-offs at any time, faults,
//     jumping clocks, second writers, crashes and restarts, with no
//     exemption).
//   - For a client that takes T before writing its annotation (Client does),
//     Client.Fenced becomes true about StaleReads after the controller
//     first sees the request once the host reads Off (OffSettle more with
//     it), within a second of the first pass at which the Off reading
//     counts.
//   - The host is never powered on while a keyed annotation is present in
//     the store at the time of the controller's versioned write before the
//     power-on, nor in a pass whose reading is unknown; invalid keys
//     (reboot.metal3.io/ with an empty or malformed key) are ignored with a
//     warning and never hold a host.
//   - The bare annotation is removed only on evidence covering the
//     request, but for two exceptions, on a BMC whose power-on sets the
//     power and that reads Transitioning for longer than SoftTimeout +
//     StaleReads after the reboot's accepted power-off (see Unknown,
//     above: a BMC stuck reading it while the host is off would keep the
//     host off for good): the reboot ends as done without an Off reading
//     if a power-off of it decided on an On or Off reading was accepted
//     before the run (Status.OffOnSane), or, if not, when the host reads
//     On at any time after the power-on the controller then sends it
//     (Status.StuckOnDecided). A BMC whose power-off job hangs (accepted, shown
//     Transitioning for ever, never carried out) gives the first one's
//     readings, and its reboot is so reported done, the host powered on,
//     though it never went off
//     (TestReview36aa_BareRebootHungPoweringOffReportedDone); so would a
//     BMC that drops an accepted power-off, reads Transitioning while the
//     host runs and stops doing so after that power-on, the second's. The fencing evidence (Status.LastPoweredOff, Fenced) is
//     never moved so. No request causes two power cycles, except that a
//     call whose answer was lost may land after the power-on (A5) and
//     cycle the host once more, which no controller can stop (the state
//     machines draw such late landings: fake.Fault.Late). A bare reboot
//     whose BMC read only Transitioning from its power-off to well after
//     the power-on that answered it sends no further power-off, whatever
//     restarts or clock steps (Status.StuckGaveUp, ErrStuckTransitioning:
//     the host may then not have been power-cycled at all;
//     TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver,
//     TestReview36ad_StuckRestartEachWindowCyclesForEver), and an On
//     reading at any time after that power-on ends it; it still sends
//     power-ons that set the power.
//   - Online=false falls back from soft to hard Config.SoftTimeout after
//     its first soft power-off, timed from the persisted
//     Status.OfflineSoftSince, whatever restarts (on a BMC that may press,
//     the soft power-off itself waits while a press whose answer was lost
//     may still land or an earlier press's shutdown may run, A5, and is
//     tried soft first: TestReview36tFix_HeldBackOfflineTriedSoftFirst);
//     from OfflineSince if the readings keep the soft power-off from going
//     out (a press needs an On reading). Once an Off reading that cannot
//     echo showed its power-off done (Status.OfflineOffSeen), a host
//     powered on by someone else meanwhile is powered off in a new
//     episode of the enforcement, soft first again
//     (TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce). Online
//     true again ends the enforcement, also while no power-on can go out
//     yet (the power-on owed is kept apart, Status.OfflineOffSeen): a
//     later Online=false begins a new one, soft first
//     (TestReview40aq_OnlineFalseAgainAfterUnreadableOnlineTrueCutHardAtOnce).
//
// Power-off is issued in the first pass that sees a request. Removing the
// bare annotation and powering on happen in one pass once the evidence
// covers every request (or on the stuck-Transitioning exceptions named in
// the Guarantees, the second after a power-on of its own that left the
// reboot pending). Requests that arrive while a reboot is pending join
// it; one that arrives after the power-on starts a new reboot. A pass that
// changes nothing allocates nothing (DecideInto); Decide costs O(k log k)
// in the number of requests.
//
// Timestamps are truncated to Config.Precision (1 s, as Kubernetes stores
// them). A power-on waits until the clock has passed the latest request, so
// that LastPoweredOn is later than every request it answers.
package reboot
