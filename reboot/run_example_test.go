package reboot_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ExampleRunner runs the reboot controller outside Kubernetes: the
// Runner serialises passes per host, requeues, backs off, and wakes a host
// when its record changes (fake.RebootHosts is a HostWatcher).
func ExampleRunner() {
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 10 * time.Millisecond})
	store := fake.NewRebootHosts(reboot.Host{Name: "node-1", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 50 * time.Millisecond, Precision: time.Millisecond}}
	hosts := func(context.Context) ([]string, error) { return []string{"node-1"}, nil }
	runner := &reboot.Runner{Loops: []reboot.Loop{rec.Loop(hosts)}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { _ = runner.Run(ctx) }()

	c := &reboot.Client{Hosts: store, Key: "fencing", Now: time.Now}
	ticket, _ := c.Request(ctx, "node-1", power.ModeHard)
	err := c.WaitFenced(ctx, ticket)
	fmt.Println("fenced:", err == nil, "- really off since the request:", hw.WasOffDuring(ticket.At, time.Now()))
	_ = c.Release(ctx, ticket)
	fmt.Println("back on:", c.WaitDone(ctx, ticket) == nil)
	// Output:
	// fenced: true - really off since the request: true
	// back on: true
}
