// Package redfishtest serves a Redfish BMC emulator for tests, as
// net/http/httptest serves HTTP: a BMC over a fake.Power (the hardware
// model of package fake, with its lies, lag and faults), on a loopback TLS
// listener (StartTLS, or StartTLSWithCA with a CA that clients insisting on
// a proper chain can trust).
//
// The BMC serves one ComputerSystem (Id "1"), or several (AddSystem: blades,
// multi-node chassis): the service root (linking JsonSchemas and
// Registries), the session service (sessions by POST to the collection or
// to its Members, tokens from crypto/rand, token or basic authentication),
// the Systems collection, each ComputerSystem with its PowerState and the
// Reset action (allowable values inline or behind an ActionInfo). As
// DSP0266 and its clients expect: HEAD wherever GET is; a method a
// resource does not allow is 405 with Allow; GET and HEAD answers carry
// Allow, Cache-Control and, for the service root, collections, sessions and
// systems, a Link with rel=describedby; an OData-Version other than 4.0 is
// 412. Quirks imitate
// real BMCs (missing Graceful* reset types, malformed allowable values,
// 409 after power-off, stale PowerState, expiring sessions, no session
// service, errors that echo the request, slow logins). It counts requests
// and logins (LoginLog: when, with which credentials' fingerprint, and
// whether accepted; MostLoginsAtOnce), records resets, and can fail the
// next GET or reset on demand.
//
// The caller's duties: close the server it starts; treat everything here as
// a test double (the CA and the credentials are throwaway). Not for
// production.
package redfishtest
