// Command remediate remediates a failed node in a simulated three-node
// cluster: worker-1's kernel hangs, the health checker marks its Machine,
// and the phased remediator powers the host off (through the reboot API),
// deletes the Node while the host is off, powers it back on and restores
// the Node's labels when the kubelet registers again. It prints every step.
// Everything is simulated on a fake clock: no cluster, no hardware.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

func main() {
	boot := flag.Duration("boot", 2*time.Minute, "how long a server takes to boot and its kubelet to register")
	mhc := flag.Duration("mhc-timeout", time.Minute, "the health checker's timeout")
	table := flag.Bool("table", false, "use the seed's stateless truth table instead of the phased mode (it loops)")
	flag.Parse()
	if err := run(os.Stdout, *boot, *mhc, *table); err != nil {
		fmt.Fprintln(os.Stderr, "remediate:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, boot, mhcTimeout time.Duration, table bool) error {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	names := []string{"worker-0", "worker-1", "worker-2"}
	powers := map[string]*fake.Power{}
	cluster := fake.NewCluster()
	var hosts []reboot.Host
	for _, n := range names {
		// BMCs that report the previous state for 6 s after a reset and
		// never say PoweringOn/Off, as many real ones do.
		powers[n] = fake.NewPower(clk.Real, fake.PowerConfig{Lag: 5 * time.Second,
			Report: fake.Report{Stale: 6 * time.Second, NoTransitioning: true}})
		hosts = append(hosts, reboot.Host{Name: n, Online: true})
		cluster.AddMachine(remediation.Machine{Name: n, UID: "uid-" + n, NodeName: n, HasControllerOwner: true})
		cluster.PutNode(remediation.Node{Name: n, Ready: true,
			Labels: map[string]string{"topology.kubernetes.io/zone": "zone-" + n[len(n)-1:], "storage": "ceph"}})
	}
	hostStore := fake.NewRebootHosts(hosts...)
	reboots := &reboot.Reconciler{Hosts: hostStore, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(n string) (power.Controller, error) { return powers[n], nil }}
	rem := &remediation.Reconciler{
		Machines: cluster, Nodes: cluster.Nodes(), Admissions: cluster, Table: table, Now: clk.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hostStore, Now: clk.Now,
			Power:  func(n string) (power.Controller, error) { return powers[n], nil },
			HostOf: func(_ context.Context, m string) (string, error) { return m, nil }},
		Limit: remediation.MaxPercent(40),
	}
	cluster.BeforeNodeFence = func(node string) {
		if powers[node].HardwareOn() {
			fmt.Fprintf(w, "SAFETY VIOLATION: node %s fenced while its host runs\n", node)
		}
	}

	hung := map[string]bool{"worker-1": true}
	onSince := map[string]time.Time{}
	for _, n := range names {
		onSince[n] = clk.Now().Add(-time.Hour) // up for an hour
	}
	badSince := map[string]time.Time{}
	last := map[string]string{}
	say := func(what, s string) {
		if last[what] != s {
			fmt.Fprintf(w, "t=%-7s %s\n", clk.Now().Sub(fake.Epoch), s)
			last[what] = s
		}
	}
	fmt.Fprintf(w, "t=%-7s worker-1's kernel hangs: node NotReady, host still on\n", "0s")
	const steps = 240 // of 5 s: 20 minutes of simulated time
	for step := 0; step < steps; step++ {
		now := clk.Now()
		for _, n := range names {
			if powers[n].Current() != power.StateOn {
				onSince[n] = time.Time{}
				cluster.SetNodeReady(n, false)
			} else if onSince[n].IsZero() {
				onSince[n], hung[n] = now, false
			}
			node := cluster.Node(n)
			up := !onSince[n].IsZero() && now.Sub(onSince[n]) >= boot && !hung[n]
			if up && !node.Exists {
				cluster.PutNode(remediation.Node{Name: n, Ready: true, Labels: map[string]string{"storage": "ceph-new"}})
				say(n+"node", "kubelet on "+n+" registers a new Node")
			} else if node.Exists {
				cluster.SetNodeReady(n, up)
			}
			node = cluster.Node(n)
			m, err := cluster.Get(ctx, n)
			if err != nil {
				continue
			}
			switch {
			case node.Exists && node.Ready:
				badSince[n] = time.Time{}
			case badSince[n].IsZero():
				badSince[n] = now
			case !m.Machine.NeedsRemediation && now.Sub(badSince[n]) >= mhcTimeout:
				cluster.SetNeedsRemediation(n, true)
				badSince[n] = now
				say(n+"mhc", "health checker: "+n+" unhealthy, sets "+remediation.NeedsRemediationAnnotation)
			}
		}
		for _, n := range names {
			if _, err := reboots.Reconcile(ctx, n); err != nil {
				return err
			}
			res, err := rem.Reconcile(ctx, n)
			if err != nil {
				return err
			}
			if table && res.TableAction != remediation.TableNothing {
				say(n+"table", fmt.Sprintf("remediator (table) %s: %s", n, res.TableAction))
			}
			if !table && res.Decision.UpdateState || res.Decision.RemoveNeedsRemediation || len(res.Decision.RestoreLabels) > 0 {
				d := res.Decision
				say(n+"rem"+d.Reason, fmt.Sprintf("remediator %s: %-20s %s%s", n, d.State.Phase, d.Reason, effects(d)))
			}
			say(n+"power", fmt.Sprintf("host %s is %s", n, powers[n].Current()))
		}
		clk.Advance(5 * time.Second)
	}
	if table {
		fmt.Fprintf(w, "stopped after %d steps (%s simulated): the seed's stateless table has no memory of what it did, so it loops (reboot, delete the Node, the Node comes back, again) and never ends by itself; without -table the phased mode ends after one power cycle\n",
			steps, clk.Now().Sub(fake.Epoch))
	}
	fmt.Fprintln(w, "summary:")
	for _, n := range names {
		node := cluster.Node(n)
		m, _ := cluster.Get(ctx, n)
		labels := make([]string, 0, len(node.Labels))
		for k, v := range node.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		fmt.Fprintf(w, "  %s: %d power cycle(s), node ready=%v, phase=%s, labels %s\n",
			n, powers[n].Cycles(), node.Ready, m.State.Phase, strings.Join(labels, ","))
	}
	return nil
}

func effects(d remediation.Decision) string {
	var e []string
	if d.AddRebootAnnotation {
		e = append(e, "add "+remediation.RebootAnnotation)
	}
	if d.DeleteNode {
		e = append(e, "delete Node")
	}
	if d.RemoveRebootAnnotation {
		e = append(e, "remove "+remediation.RebootAnnotation)
	}
	if len(d.RestoreLabels) > 0 {
		e = append(e, fmt.Sprintf("restore %d label(s)", len(d.RestoreLabels)))
	}
	if d.RemoveNeedsRemediation {
		e = append(e, "remove "+remediation.NeedsRemediationAnnotation)
	}
	if len(e) == 0 {
		return ""
	}
	return " [" + strings.Join(e, "; ") + "]"
}
