// Package inventory describes the servers a rolling reboot may touch (an
// inventory file in YAML) and runs reboot jobs on them: Fleet is the
// plan.Fleet that cmd/rebootctl's executor uses.
//
// # The inventory
//
// Per server: its UUID and hostname, core and headnode flags, the platform
// it runs now, its BMC (a Redfish base URL or an IPMI address, a username,
// and where the password comes from: an environment variable or a file;
// never the inventory), a health check (a TCP port, an HTTP URL and the
// status it must answer, or a command) that stands for "its services are
// up", optional drain and undrain commands, and labels (rack, zone: its
// failure domains). Defaults apply to every server. The plan section
// (PlanPolicy) gives new plans maintenance windows, a canary ramp, limits
// per failure domain and blocking conditions. Unknown keys are errors, so that a misspelt key never drops a
// check. Parse and Load check everything they can without the network.
//
// # Jobs
//
// A reboot job (Fleet.CreateJob, idempotent by job UUID) drains the
// server, asks the reboot package for a soft power cycle with a keyed
// request (falling back to hard after reboot.Config.SoftTimeout), releases
// it once the server is fenced on evidence (an Off reading taken at least
// reboot.Config.StaleReads after the request was seen, so not an echo of
// the past), lets the reboot controller power it on,
// waits for the health check, and undrains. Every state change is written
// to the fleet state file (bbolt) before the step it starts; the reboot
// request's value is chosen before it is written. A Fleet opened again
// (an executor restarted) resumes every job where it was, without a
// second power cycle.
//
// # The caller's duties
//
//   - One executor per fleet state file (bbolt's lock enforces it).
//   - Health checks must fail while a server is down and pass only when
//     its services are really up: the plan trusts them for "operational".
//   - Drain and undrain commands must be idempotent: a restarted executor
//     may run the one it was in the middle of again.
//   - A blocking condition's command must exit 0 only when reboots may
//     start; Observe runs each of an unfinished plan's conditions (30 s
//     timeout each, the inventory's command environment) at every pass.
//
// Observe reports each job's phases for the plan's report (plan.Phases):
// drained when the drain command ended, off when the job saw its server
// fenced, on when the reboot controller powered it on (its record is kept
// to the second, so never before off), healthy when the health check
// first passed after the power cycle. Job steps and reboot decisions are
// logged with the server's hostname.
//
// # Guarantees
//
//   - A job powers its server off and on at most once, across restarts.
//   - A cancelled job stops before it asks for the reboot; after that it
//     completes (the plan counts the server offline until it has).
//   - A server counts as down while its health check fails or a job is
//     rebooting it; its services count as up only when the check passes
//     and no job is busy with it.
package inventory
