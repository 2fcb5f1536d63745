// Package ipmitest runs an IPMI v2.0 BMC emulator for tests (RMCP+,
// lanplus, on loopback UDP), as net/http/httptest runs HTTP servers: a BMC
// over a fake.Power (the hardware model of package fake), built on
// github.com/bougou/go-ipmi's reference server.
//
// Get Chassis Status reports what the Power reports (with its lies: stale,
// flapping; a change under way shows as the state it leaves, since IPMI
// has only a power bit; a state it cannot tell is completion code CEh).
// Chassis Control power up, power down and soft shutdown are the Power's
// On, hard Off and soft Off. Faults come back as completion codes, and
// FailNext injects any code for the next command. Restart drops every
// session (a BMC reset); the host's power is untouched. App Cold Reset and
// Warm Reset (ipmitool mc reset) leave the host's power alone too (they
// reset the BMC, not the host). The BMC counts UDP
// requests and logins (RMCP+ Open Session Requests) and records the
// chassis commands it received.
//
// Importing this package pulls in go-ipmi's server; package fake does not.
// The caller's duty: Close the BMC. Not for production.
package ipmitest
