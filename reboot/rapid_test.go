package reboot_test

import (
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestRebootStateMachine drives the Reconciler and fencing clients (the
// Client API) in a world drawn from the adversary fakes: a BMC that reports
// stale, flapping or unknown states, power that lags and soft shutdowns that
// are slow, ignored or unsupported, injected faults (also applied ones),
// hardware powered on or off out of band, a wall clock that steps by any
// precision and jumps forwards (up to a year) and back and is corrected,
// second writers between the Reconciler's read and write, injected
// conflicts, and crashes and restarts between any two steps.
//
// After every step, against ground truth (the fake hardware's timeline on
// real time, and the store's contents):
//   - Fenced: a client told its host is fenced (Client.Fenced's answer) was
//     told the truth: the hardware was off at some real instant at or after
//     the client's T, up to how far the wall clock has jumped back since
//     (the documented limit of time-based answers), whenever the hardware
//     was powered on or off out of band (no exemption: issue 24);
//   - no power-on is sent while a keyed annotation is in the store, nor in
//     a pass whose power read was unknown; and, over time on the ground
//     truth (late landings of lost calls included), the hardware is not
//     powered on by a command while a keyed annotation holds the host but
//     by a power-on call (or after an out-of-band change, see StateMachine);
//   - the bare annotation is removed only after the hardware was really off
//     after it was written;
//   - keyed annotations are removed only by their owners;
//   - power cycles made by commands ≤ reboots decided + out-of-band offs.
//
// At the end the world behaves (honest reads, no faults, corrected clock,
// no second writer) and the clients cooperate: every client waiting for
// Fenced gets it, releases, and every host ends on with nothing pending.
//
// A second writer that never stops (an inventory sync writing its own
// annotation) stays on in the liveness phase: every request must still be
// answered.
//
// The state machine is the conformance kit's (reboottest.StateMachine),
// run here on the fake store, so that third-party stores are tested with
// exactly this one.
func TestRebootStateMachine(t *testing.T) { reboottest.StateMachine(t, fakeStores) }

// TestRebootStateMachineButtons is TestRebootStateMachine in worlds that
// also draw BMCs whose power-off (soft, or every call) is a press of the
// power button (fake.ButtonKind: a press toggles the hardware, after the
// OS's shutdown delay), and a second writer that writes the host every
// few steps and never stops, also in the liveness phase (issue 36). It
// also checks, against the hardware's ground truth, that no power-off
// ever powers a host on, unless the host was powered on or off out of
// band within the stale bound before the press (its On reading may echo
// a state from before that: assumption A2's limit).
func TestRebootStateMachineButtons(t *testing.T) { reboottest.StateMachineButtons(t, fakeStores) }

// TestRebootStateMachineStuck is TestRebootStateMachineButtons in worlds
// that also toggle Online and draw a BMC stuck reading Transitioning or
// null (while the host runs, or while it is off), kept stuck for part of
// the liveness phase (review 36 round 23): no power-on while Online is
// false, no command powering the hardware on while it is held (ground
// truth), and every request answered once the readings are sane.
func TestRebootStateMachineStuck(t *testing.T) { reboottest.StateMachineStuck(t, fakeStores) }

// fakeStores is the fake store for the kit.
func fakeStores(h reboot.Host) (reboottest.Stores, error) {
	return reboottest.Stores{Hosts: fake.NewRebootHosts(h)}, nil
}

// TestRebootStateMachineHostile is TestRebootStateMachineStuck in harsher
// worlds (review 36 round 24): a BMC that goes dead, stuck readings that
// flap with sane ones, Online kept false through part of the liveness
// phase, a held host's power checked over time, and the calls and writes
// of a held, off host behind a dead BMC bounded.
func TestRebootStateMachineHostile(t *testing.T) { reboottest.StateMachineHostile(t, fakeStores) }
