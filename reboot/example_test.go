package reboot_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// A fencing client asks for a hard, phased reboot, waits until the host is
// fenced, then releases it; the controller powers the host on. The BMC is
// known to report states at most 5 s old (Config.StaleReads), and its
// power-off takes 3 s.
func ExampleClient() {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: 3 * time.Second})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "node-0", Online: true})
	r := &reboot.Reconciler{
		Hosts:     hosts,
		Power:     func(string) (power.Controller, error) { return pw, nil },
		Now:       clk.Now,
		Monotonic: clk.Monotonic,
		Config:    reboot.Config{StaleReads: 5 * time.Second},
	}
	_, _ = r.Reconcile(ctx, "node-0") // the controller's first pass: nothing to do
	clk.Advance(time.Minute)

	client := &reboot.Client{Hosts: hosts, Key: "fencing", Now: clk.Now}
	clk.Advance(1500 * time.Millisecond) // client times have any precision
	ticket, _ := client.Request(ctx, "node-0", power.ModeHard)
	start := clk.Now()
	released := false
	for pass := 1; pass <= 12; pass++ {
		res, _ := r.Reconcile(ctx, "node-0")
		fenced, _ := client.Fenced(ctx, ticket)
		fmt.Printf("+%v: %s, %s, fenced=%v\n", clk.Now().Sub(start), res.Decision.Phase, res.Decision.Power, fenced)
		if fenced && !released {
			_ = client.Release(ctx, ticket) // workloads moved: let it come back
			released = true
			continue // the store changed: the controller runs at once
		}
		if res.RequeueAfter == 0 {
			break // nothing due until something changes
		}
		clk.Advance(res.RequeueAfter)
		if done, _ := client.Done(ctx, ticket); done {
			break
		}
	}
	done, _ := client.Done(ctx, ticket)
	fmt.Println("done:", done, "hardware on:", pw.HardwareOn())
	// Output:
	// +0s: powering-off, power-off, fenced=false
	// +1s: powering-off, none, fenced=false
	// +2s: powering-off, none, fenced=false
	// +4s: powering-off, none, fenced=false
	// +6s: held-off, none, fenced=true
	// +6s: powering-on, power-on, fenced=false
	// done: true hardware on: true
}

// Decide alone, for controllers that do their own I/O.
func ExampleDecide() {
	d := reboot.Decide(reboot.Observed{
		Annotations: map[string]string{"reboot.metal3.io": ""},
		Online:      true,
		Power:       power.StateOn,
	}, fake.Epoch)
	fmt.Println(d.Power, d.Mode, d.Status.PendingRebootSince.Format(time.RFC3339))
	fmt.Println(d.Reason)
	// Output:
	// power-off soft 2026-01-01T00:00:00Z
	// reboot requested: power off soft
}
