package ipmi_test

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// Network adversary modes of TestNetworkAdversaryNeverBecomesState.
const (
	netHonest         = iota
	netForgeFirst     // clear-text "off"/"done" answers ahead of the BMC's
	netForgeAuthFlag  // the same with the authenticated flag and a made-up AuthCode
	netReplay         // the last authentic answer replayed ahead of the BMC's
	netForgeInstead   // the request dropped, forgeries in its stead
	netReorder        // each authentic answer held back until the next one
	netAdversaryModes // count
)

// TestNetworkAdversaryNeverBecomesState drives the adapter through a man
// in the middle that, operation by operation, forges answers in clear
// text or with made-up AuthCodes ahead of the BMC's, replays authentic
// answers, drops requests and answers them itself, or reorders answers,
// while the host is powered on and off out of band, and checks against
// the hardware (ground truth) after every operation: a state read without
// an error is the hardware's, a power change that succeeded happened, and
// every error is classified. A session that only gets forgeries ends
// busy. (With go-ipmi v0.9.1, the first forged answer was taken, and a
// made-up encrypted one crashed the process.)
func TestNetworkAdversaryNeverBecomesState(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		hw := fake.NewPower(time.Now, fake.PowerConfig{Initial: rapid.SampledFrom([]power.State{power.StateOn, power.StateOff}).Draw(t, "initial")})
		// Sessions whose Close Session the man in the middle dropped hold
		// the BMC's slots until they time out: short here.
		b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, SessionTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m, err := startMITM(b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer m.close()
		mode := netHonest
		var last, held []byte
		m.mu.Lock() // the hooks run under m.mu
		m.toBMC = func(p []byte) bool {
			if !m.active || !sessionDatagram(p) {
				return true
			}
			switch mode {
			case netForgeFirst, netForgeInstead:
				for _, q := range chassisOffAnswers(m.consoleID, 0x00, 1)[:16] {
					m.inject(m.peer, q)
				}
				return mode == netForgeFirst
			case netForgeAuthFlag:
				for _, q := range chassisOffAnswers(m.consoleID, 0xc0, 1)[:16] {
					m.inject(m.peer, q)
				}
			case netReplay:
				if last != nil {
					m.inject(m.peer, last)
				}
			}
			return true
		}
		m.toClient = func(p []byte) [][]byte {
			if !sessionDatagram(p) {
				return [][]byte{p}
			}
			last = p
			if mode != netReorder {
				return [][]byte{p}
			}
			if held == nil {
				held = p
				return nil
			}
			out := [][]byte{p, held}
			held = nil
			return out
		}
		m.mu.Unlock()
		host, port := m.addr()
		// The network is honest until the first step: a Connect that
		// fails is a timeout of a loaded machine (50 ms, -race), tried
		// again; only a class other than busy is a failure.
		var c *ipmi.Controller
		for try := 0; ; try++ {
			c, err = ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: user, Password: pass, Timeout: 50 * time.Millisecond, Retries: 1})
			if err == nil {
				break
			}
			if power.Classify(err) != power.ClassBusy || try == 20 {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		defer c.Close()
		for i := 0; i < rapid.IntRange(1, 8).Draw(t, "steps"); i++ {
			m.mu.Lock()
			mode = rapid.IntRange(0, netAdversaryModes-1).Draw(t, "mode")
			held = nil
			m.mu.Unlock()
			op := rapid.IntRange(0, 5).Draw(t, "op")
			var err error
			switch op {
			case 0:
				var s power.State
				s, err = c.State(ctx)
				if err == nil && s != hw.Current() {
					t.Fatalf("mode %d: read %v, the hardware is %v", mode, s, hw.Current())
				}
				if err != nil && s != power.StateUnknown {
					t.Fatalf("mode %d: %v with an error", mode, s)
				}
			case 1:
				err = c.On(ctx)
				if err == nil && !hw.HardwareOn() {
					t.Fatalf("mode %d: On succeeded, the hardware is off", mode)
				}
			case 2:
				err = c.Off(ctx, power.ModeHard)
				if err == nil && hw.HardwareOn() {
					t.Fatalf("mode %d: hard Off succeeded, the hardware is on", mode)
				}
			case 3:
				err = c.Off(ctx, power.ModeSoft)
				if err == nil && hw.HardwareOn() {
					t.Fatalf("mode %d: soft Off succeeded, the hardware is on", mode)
				}
			case 4:
				hw.OutOfBandOn()
			case 5:
				hw.OutOfBandOff()
			}
			if err != nil && power.Classify(err) == power.ClassNone {
				t.Fatalf("unclassified error %v", err)
			}
		}
		// Liveness: once the network is honest again, the adapter reads the
		// hardware's state, at the latest once the BMC timed out the
		// sessions the attack left behind (busy until then: no free
		// session slot).
		m.mu.Lock()
		mode, held = netHonest, nil
		m.mu.Unlock()
		var s power.State
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s, err = c.State(ctx)
			if err == nil || time.Now().After(deadline) {
				break
			}
			if power.Classify(err) != power.ClassBusy {
				t.Fatalf("an honest network again, and %v", err)
			}
		}
		if err != nil || s != hw.Current() {
			t.Fatalf("an honest network again, and %v, %v (hardware %v)", s, err, hw.Current())
		}
	})
}
