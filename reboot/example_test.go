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
// fenced, then releases it.
func ExampleReconciler() {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Now, fake.PowerConfig{Lag: 3 * time.Second})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "node-0", Online: true})
	r := &reboot.Reconciler{
		Hosts: hosts,
		Power: func(string) (power.Controller, error) { return pw, nil },
		Now:   clk.Now,
	}
	requested := clk.Now()
	_ = hosts.Mutate("node-0", func(h *reboot.Host) {
		h.Annotations["reboot.metal3.io/fencing"] = `{"mode":"hard"}`
	})
	for pass := 1; pass <= 5; pass++ {
		res, _ := r.Reconcile(ctx, "node-0")
		h, _ := hosts.Get(ctx, "node-0")
		fmt.Printf("pass %d: %s, %s, fenced=%v\n", pass, res.Decision.Phase, res.Decision.Power, h.Status.Fenced(requested))
		if h.Status.Fenced(requested) {
			_ = hosts.Mutate("node-0", func(h *reboot.Host) { delete(h.Annotations, "reboot.metal3.io/fencing") })
		}
		clk.Advance(5 * time.Second)
	}
	// Output:
	// pass 1: powering-off, power-off, fenced=false
	// pass 2: held-off, none, fenced=true
	// pass 3: powering-on, power-on, fenced=true
	// pass 4: idle, none, fenced=true
	// pass 5: idle, none, fenced=true
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
