package ipmi

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestIdleSessionReopened: with no keep-alive, a session left idle past
// the limit is ended (Close Session, not waited for) and a new one opened
// before the next operation, rather than found dead by a timeout.
func TestIdleSessionReopened(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: "admin", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	c, err := Connect(ctx, Config{Host: b.Host(), Port: b.Port(), Username: "admin", Password: "pw", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.idle = 20 * time.Millisecond
	if s, err := c.State(ctx); err != nil || s != power.StateOn {
		t.Fatalf("%v %v", s, err)
	}
	logins := b.Logins()
	time.Sleep(40 * time.Millisecond)
	start := time.Now()
	if s, err := c.State(ctx); err != nil || s != power.StateOn {
		t.Fatalf("%v %v", s, err)
	}
	if b.Logins() != logins+1 {
		t.Fatalf("logins %d, want %d: the idle session was not replaced", b.Logins(), logins+1)
	}
	if d := time.Since(start); d >= time.Second {
		t.Fatalf("the read waited %v: a timeout on the idle session", d)
	}
}
