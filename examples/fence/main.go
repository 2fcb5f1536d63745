// Command fence fences one host of a small simulated fleet with a phased,
// hard reboot (reboot.metal3.io/fencing), while another host gets a plain
// soft reboot that its operating system ignores, so that the soft shutdown
// falls back to hard after the timeout. Everything runs against fake power
// controllers on a simulated clock: no hardware, done in milliseconds.
//
// It prints every reconcile pass that did something, and the fencing
// client's view: when it learned the host was fenced and released it.
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

func main() {
	hold := flag.Duration("hold", 30*time.Second, "how long the fencing client keeps the host off after it is fenced")
	softTimeout := flag.Duration("soft-timeout", 180*time.Second, "soft shutdown timeout before falling back to hard")
	lag := flag.Duration("lag", 4*time.Second, "how long a power change takes on the simulated BMCs")
	useRedfish := flag.Bool("redfish", false, "drive each host through the Redfish adapter, against an emulated BMC over HTTPS on loopback")
	useIPMI := flag.Bool("ipmi", false, "drive each host through the IPMI adapter (lanplus), against an emulated BMC on loopback UDP")
	flag.Parse()
	via := ""
	switch {
	case *useRedfish && *useIPMI:
		fmt.Fprintln(os.Stderr, "fence: -redfish or -ipmi, not both")
		os.Exit(2)
	case *useRedfish:
		via = "redfish"
	case *useIPMI:
		via = "ipmi"
	}
	if err := run(os.Stdout, *hold, *softTimeout, *lag, via); err != nil {
		fmt.Fprintln(os.Stderr, "fence:", err)
		os.Exit(1)
	}
}

// run tells the story; via is "" (the fake power controllers directly),
// "redfish" or "ipmi" (through that adapter against emulated BMCs).
func run(w io.Writer, hold, softTimeout, lag time.Duration, via string) error {
	useRedfish := via == "redfish"
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	names := []string{"node-0", "node-1", "node-2"}
	powers := map[string]*fake.Power{
		"node-0": fake.NewPower(clk.Real, fake.PowerConfig{Lag: lag}),
		// node-1's BMC reports the previous state for 8 s after a reset.
		"node-1": fake.NewPower(clk.Real, fake.PowerConfig{Lag: lag, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: 8 * time.Second, NoTransitioning: true}}),
		"node-2": fake.NewPower(clk.Real, fake.PowerConfig{Lag: lag, IgnoreSoft: true}),
	}
	var hosts []reboot.Host
	controllers := map[string]power.Controller{}
	bmcs := map[string]*redfishtest.BMC{}
	ipmiBMCs := map[string]*ipmitest.BMC{}
	// One Pool owns the connections to the BMCs: it logs in on first use,
	// bounds every call by a deadline and backs off after failures.
	pool := power.NewPool(power.PoolConfig{})
	defer pool.Close()
	for _, n := range names {
		hosts = append(hosts, reboot.Host{Name: n, Online: true})
		controllers[n] = powers[n]
		password := "example-only-" + n
		if via == "ipmi" {
			bmc, err := ipmitest.NewBMC(powers[n], ipmitest.Config{Username: "admin", Password: password})
			if err != nil {
				return err
			}
			defer bmc.Close()
			cfg := ipmi.Config{Host: bmc.Host(), Port: bmc.Port(), Username: "admin", Password: password}
			controllers[n] = pool.Controller(n, power.Target{BMC: bmc.Addr(), Config: "v1",
				Connect: func(ctx context.Context) (power.Controller, error) { return ipmi.Connect(ctx, cfg) }})
			ipmiBMCs[n] = bmc
		}
		if useRedfish {
			bmc := redfishtest.NewBMC(clk.Real, powers[n], "admin", password)
			srv := bmc.StartTLS()
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			cfg := redfish.Config{Endpoint: srv.URL, Username: "admin", Password: password, RootCAs: roots}
			controllers[n] = pool.Controller(n, power.Target{BMC: srv.URL, Config: "v1",
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
			bmcs[n] = bmc
		}
	}
	if useRedfish {
		fmt.Fprintf(w, "each host is driven through Redfish (gofish) against an emulated BMC over HTTPS on loopback\n")
	}
	if via == "ipmi" {
		fmt.Fprintf(w, "each host is driven through IPMI (lanplus, cipher suite 3) against an emulated BMC on loopback UDP\n")
	}
	store := fake.NewRebootHosts(hosts...)
	r := &reboot.Reconciler{
		Hosts:     store,
		Power:     func(n string) (power.Controller, error) { return controllers[n], nil },
		Now:       clk.Now,
		Monotonic: clk.Monotonic,
		Config:    reboot.Config{SoftTimeout: softTimeout},
	}
	// The controller has been running for a while before the story starts
	// (it trusts Off readings only Config.StaleReads after its start or its
	// last power-on).
	for _, n := range names {
		if _, err := r.Reconcile(ctx, n); err != nil {
			return err
		}
	}
	clk.Advance(time.Minute)
	start := clk.Now()

	// The fencing client wants node-1's processes stopped; node-2 gets a
	// plain reboot request.
	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	ticket, err := client.Request(ctx, "node-1", power.ModeHard)
	if err != nil {
		return err
	}
	if err := store.Mutate("node-2", func(h *reboot.Host) { h.Annotations["reboot.metal3.io"] = "" }); err != nil {
		return err
	}
	fmt.Fprintf(w, "t=%-6s client: reboot.metal3.io/fencing on node-1 (hard), reboot.metal3.io on node-2 (soft)\n", "0s")

	var released time.Time
	holding := true
	for step := 0; step < 200; step++ {
		now := clk.Now()
		t := now.Sub(start)
		for _, n := range names {
			res, err := r.Reconcile(ctx, n)
			if err != nil {
				return err
			}
			d := res.Decision
			if d.Power != reboot.ActionNone || d.UpdateStatus {
				act := d.Power.String()
				if d.Power == reboot.ActionPowerOff {
					act += " (" + d.Mode.String() + ")"
				}
				fmt.Fprintf(w, "t=%-6s %s: %-12s %-18s %s\n", t, n, d.Phase, act, d.Reason)
			}
		}
		if holding {
			fenced, err := client.Fenced(ctx, ticket)
			if err != nil {
				return err
			}
			switch {
			case released.IsZero() && fenced:
				released = now.Add(hold)
				h, _ := store.Get(ctx, "node-1")
				fmt.Fprintf(w, "t=%-6s client: node-1 is fenced (off at %s); workloads can move; releasing in %s\n",
					t, h.Status.LastPoweredOff.Sub(start), hold)
			case !released.IsZero() && !now.Before(released):
				if err := client.Release(ctx, ticket); err != nil {
					return err
				}
				holding = false
				fmt.Fprintf(w, "t=%-6s client: removed reboot.metal3.io/fencing\n", t)
			}
		}
		if done(ctx, store, powers, names) {
			fmt.Fprintf(w, "t=%-6s all hosts on, no reboot pending\n", t)
			break
		}
		clk.Advance(5 * time.Second)
	}
	for _, n := range names {
		h, _ := store.Get(ctx, n)
		calls := fmt.Sprintf("%d power calls", len(powers[n].Calls()))
		if useRedfish {
			calls = fmt.Sprintf("%d Redfish requests, resets %v", bmcs[n].Requests(), bmcs[n].Resets())
		}
		if via == "ipmi" {
			calls = fmt.Sprintf("%d IPMI round trips, chassis control %v", ipmiBMCs[n].Packets(), controls(ipmiBMCs[n].Commands()))
		}
		fmt.Fprintf(w, "%s: %d power cycle(s), %s, lastPoweredOn=%s\n", n, powers[n].Cycles(), calls, rel(h.Status.LastPoweredOn, start))
	}
	doneAll, err := client.Done(ctx, ticket)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fencing client: reboot done=%v\n", doneAll)
	return nil
}

func done(ctx context.Context, store *fake.RebootHosts, powers map[string]*fake.Power, names []string) bool {
	for _, n := range names {
		h, err := store.Get(ctx, n)
		if err != nil || h.Status.Pending() || len(h.Annotations) > 0 || powers[n].Current() != power.StateOn {
			return false
		}
	}
	return true
}

// controls leaves out the status reads.
func controls(cmds []string) []string {
	var out []string
	for _, c := range cmds {
		if c != ipmitest.Status {
			out = append(out, c)
		}
	}
	return out
}

func rel(t, start time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(start).String()
}
