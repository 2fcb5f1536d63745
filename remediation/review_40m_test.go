package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40m_MovedRequestsNewHostWhileOldHeldOff: moved_test.go and
// phased.go's comments: "the old request goes first ... and only once it
// is gone is a new request written to the new host: never two held at
// once". held (held.go) counts a host off after the request and not
// powered on since as held, and RebootAPIHosts.Get reads that evidence on
// the request's host after a move. But phased.go's `case moved(o):`
// writes the request to the new host as soon as the old request is gone,
// without asking whether the old host is still held: h1, powered off for
// m1's request (its BMC now refusing On: the fault still on), stays off,
// and h2 is powered off for the same single admission. Ground truth: both
// fake hardwares off at once, one admission (the storm guard counts one).
func TestReview40m_MovedRequestsNewHostWhileOldHeldOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	g.hostOf.Store("h2") // the Machine now maps to h2
	for i := 0; i < 4; i++ {
		_ = g.pass(t)
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && g.hw["h2"].HardwareOn() {
		time.Sleep(20 * time.Millisecond)
	}
	a, _ := g.cluster.GetAdmissions(context.Background())
	if !g.hw["h1"].HardwareOn() && !g.hw["h2"].HardwareOn() {
		t.Fatalf("m1 (one admission: %v) has h1 off (never powered on since its request: truth %v) and h2 powered off for its new request (truth %v): two hosts held at once; state %+v",
			a.Machines, g.hw["h1"].Truth(), g.hw["h2"].Truth(), g.state())
	}
}
