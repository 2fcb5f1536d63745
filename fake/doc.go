// Package fake holds deterministic, fault-injecting implementations of
// rebootkit's interfaces for tests and simulations, built to lie the way
// real hardware and real clusters do, and to tell the test what really
// happened.
//
// # Ground truth and what is reported
//
// Power separates the hardware (the ground truth: Truth, WasOnAt,
// WasOffDuring, OffThroughout, HardwareOn) from what State reports
// (Report). The ground truth is conservative for fencing: the hardware
// counts as running from the instant a power-on starts until the instant a
// power-off completes. Report's modes combine:
//
//   - honest (the zero Report): Transitioning while a change is under way;
//   - Stale: the state as it was Stale ago (sushy-tools and iDRAC report
//     the old state for seconds after a reset);
//   - Flap: every read is a random age in [0, Stale], so reads flap between
//     the old and the new state;
//   - NoTransitioning: never PoweringOn/PoweringOff, the old state instead;
//   - Unknown: a share of reads report StateUnknown without an error (BMC
//     emulators show it as PowerState null, missing, or "Paused").
//
// PowerConfig.Button makes a Power a BMC with a power button (ButtonSoft:
// its soft Off is a press, as on firmware with no graceful reset type;
// ButtonAll: every On and Off is one): a press toggles the hardware, on
// if it is off, an OS shutdown of SoftDelay if it runs. Its TogglesOff
// says so (reboot.Toggler). The zero value keeps the Power every other
// test knows.
//
// Out-of-band power changes (OutOfBandOn, OutOfBandOff: a person at the
// console, a power-restore policy, a crash) are marked as such in the
// truth. The protocol emulators live beside their adapters, as
// net/http/httptest does: power/redfish/redfishtest (Redfish over HTTP) and
// power/ipmi/ipmitest (IPMI v2.0 lanplus over loopback UDP, on go-ipmi's
// reference server). Each serves a Power and reports through the same
// model, so the same lies, lag and faults reach an adapter over the wire.
//
// # Time
//
// Clock has a wall clock (Now: what controllers read; it jumps forward and
// back with Jump and Set, and Correct puts it back) and a real time line
// (Real: what hardware lives on, never jumps; Monotonic: elapsed real
// time). Pass clk.Real to NewPower (and to redfishtest.NewBMC), clk.Now and clk.Monotonic to
// controllers.
//
// # Second writers
//
// Every store (RebootHosts, Cluster, PlanStore, ReuseHosts, and Records,
// the single-record inventory of remediation.Records) versions its
// records and returns conflicts honestly; on the first four SetInterloper
// installs a second writer that runs between the component's read and its write (an
// operator, kubectl, a second reconciler). Fault knobs (FailUpdates,
// FailPuts, FailNext) are safe to set
// while the fake is in use. RebootHosts.Other, PlanStore.Other,
// Cluster.OtherMachines and Cluster.OtherAdmissions give a second handle
// on the same hosts, plans, Machines or admission record, as another
// process has it (reboottest, plantest and remediationtest race writers
// across both). RebootHosts, Cluster and Records can watch
// (reboot.HostWatcher, remediation.MachineWatcher and RecordWatcher):
// their channels take every write, coalesced, and never block a writer.
// RebootHosts, Cluster (each of its handles: machines, admissions, nodes)
// and Records write nothing once the write's context has ended: they ask
// ctx.Err() under their lock just before they write, as a store that
// checks its context before it sends does (a reboot.Guard's write after
// its lease ran out, from a paused leader, is refused; reboottest and
// remediationtest check it).
//
// # A datacenter
//
// Fleet simulates servers and reboot jobs for plans: jobs run on after a
// plan gives up on them unless cancelled through the fleet (and reboot
// their server anyway once they sent the reboot command), finished jobs
// can be garbage-collected, servers go down and up for reasons of their own
// (SetDown) or go missing from the observations (Hide), and Starts records,
// for every job, the servers that were offline at that instant.
//
// # Drawing a world
//
// DrawPowerConfig, DrawReport and DrawClockMove draw all of the above for
// rapid property tests. Check safety invariants against ground truth, never
// against what the code under test was told.
//
// They are not for production: everything is in memory and time is
// whatever the Clock says. All fakes are safe for concurrent use.
package fake
