package power_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// Decisions act on the class of a power call's outcome, not on its text.
func ExampleClassify() {
	errs := []error{
		nil,
		&power.Error{Op: "off soft", Class: power.ClassUnsupported, Status: 400, Message: "GracefulShutdown not allowed"},
		&power.Error{Op: "on", Class: power.ClassBusy, Status: 409},
		fmt.Errorf("connect: %w", power.ErrFailed),
	}
	for _, err := range errs {
		fmt.Println(power.Classify(err))
	}
	fmt.Println(errs[1])
	// Output:
	// none
	// unsupported
	// busy
	// failed
	// power: off soft: unsupported (status 400): GracefulShutdown not allowed
}

// One Pool owns the connections to every BMC. Here the "BMC" of node-0
// refuses the password: the first call logs in and fails with ErrAuth, the
// calls during the back-off are not tried, and a corrected Config is tried
// at once.
func ExamplePool() {
	clk := fake.NewClock(time.Time{})
	pool := power.NewPool(power.PoolConfig{Now: clk.Now})
	defer pool.Close()

	logins := 0
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	target := func(password string) power.Target {
		return power.Target{BMC: "https://10.0.0.5", Config: "password version " + password,
			Connect: func(ctx context.Context) (power.Controller, error) {
				logins++
				if password != "right" {
					return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Err: power.ErrAuth}
				}
				return hw, nil
			}}
	}
	ctx := context.Background()
	c := pool.Controller("node-0", target("wrong"))
	for i := 0; i < 3; i++ {
		_, err := c.State(ctx)
		fmt.Printf("after %2.0fs: auth failure %v, not tried %v, logins %d\n", clk.Monotonic().Seconds(),
			errors.Is(err, power.ErrAuth), errors.Is(err, power.ErrBackoff), logins)
		clk.Advance(20 * time.Second)
	}
	s, err := pool.Controller("node-0", target("right")).State(ctx)
	fmt.Println(s, err, "logins", logins)
	// Output:
	// after  0s: auth failure true, not tried false, logins 1
	// after 20s: auth failure true, not tried true, logins 1
	// after 40s: auth failure true, not tried false, logins 2
	// on <nil> logins 3
}

// ExampleCredentialsKey: two hosts whose (separate) Secrets hold the same
// credentials get the same login identity, so they share one session;
// the identity holds no secret.
func ExampleCredentialsKey() {
	a := power.CredentialsKey("https://chassis-1", "admin", "s3cret", "verify")
	b := power.CredentialsKey("https://chassis-1", "admin", "s3cret", "verify")
	c := power.CredentialsKey("https://chassis-1", "admin", "rotated", "verify")
	fmt.Println(a == b, a == c, strings.Contains(a, "s3cret"))
	// Output: true false false
}

// A caller that must know whether a power command took effect by the
// time its call returned attaches a Queued to the call's context; an
// adapter whose BMC accepted the command for later (a Redfish 202
// Accepted) notes it there.
func ExampleWithQueued() {
	var q power.Queued
	ctx := power.WithQueued(context.Background(), &q)
	fmt.Println(q.Queued())
	power.NoteQueued(ctx) // what power/redfish does on a 202 Accepted
	fmt.Println(q.Queued())
	power.NoteQueued(context.Background()) // no Queued attached: nothing to note
	// Output:
	// false
	// true
}
