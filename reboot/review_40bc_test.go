package reboot_test

import "testing"

// TestReview40bc_LostOfflinePowerOffLandsAfterOnlineTrueUnknownReadingLetsGoOff
// replays the 40az ground-truth model (forgetRule40az, Online=true check
// on) on the case it found on 0624c73 with a new seed (-rapid.seed=918273645,
// 3,000 checks; fail file under testdata/rapid/ of this test's name, which
// rapid replays first, so the test is deterministic): two processes with
// Guards, a BMC with pLost 0.4 (lost calls landing up to 150 s late),
// pRefuse 0.3, pUnread 0.3, 20% null readings, power button presses
// (button 2). Steps: hand on; restart of the leader; hand on; failover to
// proc 1; the record re-created Online=false at 4m12s (proc 1 sends its
// Online=false power-off, whose answer is lost); Online=true at 4m16s
// (the host still reads On: the enforcement ends, the status is clean);
// dropped from the listing at 4m20s. The lost power-off lands at 5m10s
// (truth: off, by command). Passes then read Off ("the power-on presses
// the power button: wait until no press of ours may land and the reading
// cannot be an echo", busy) or null ("power state unknown: wait"); once
// memory's LostLanding and shutdown windows are over, the leader's pass
// with a null reading reports Busy=false (statusBusy sees a clean
// status, callsMayLand and shutdownMayRun have expired) and the Runner
// forgets the key at 6m32s: the Online=true host, turned off by our own
// power-off, is left off, unwatched, for good.
func TestReview40bc_LostOfflinePowerOffLandsAfterOnlineTrueUnknownReadingLetsGoOff(t *testing.T) {
	forgetRule40az(t, true)
}
