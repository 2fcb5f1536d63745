// Command node-reuse upgrades a simulated MachineDeployment with node reuse
// on, next to one with reuse off, and shows that the first pool's machines
// come back on the very hosts they had (so their disks are kept), while the
// second pool takes whatever is free.
//
// Each old machine is deleted in turn: its host is labelled (if reuse is on),
// deprovisioned (which takes a few rounds, so the new machine must requeue
// rather than fall back), becomes Available, and the new machine claims a
// host through the store with optimistic concurrency.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/nodereuse"
)

func main() {
	machines := flag.Int("machines", 3, "machines per pool")
	spare := flag.Int("spare", 4, "free hosts in the fleet")
	seed := flag.Uint64("seed", 1, "selection seed")
	flag.Parse()
	if err := run(os.Stdout, *machines, *spare, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "node-reuse:", err)
		os.Exit(1)
	}
}

type pool struct {
	pool  nodereuse.Pool
	reuse bool
	hosts map[string]string // machine -> host
}

func run(w io.Writer, machines, spare int, seed uint64) error {
	ctx := context.Background()
	var hosts []nodereuse.Host
	pools := []*pool{
		{pool: nodereuse.MachineDeployment("storage"), reuse: true, hosts: map[string]string{}},
		{pool: nodereuse.MachineDeployment("web"), reuse: false, hosts: map[string]string{}},
	}
	n := 0
	for _, p := range pools {
		for i := 0; i < machines; i++ {
			m := fmt.Sprintf("%s-v1-%d", p.pool.Name, i)
			h := fmt.Sprintf("bmh-%02d", n)
			n++
			hosts = append(hosts, nodereuse.Host{Name: h, State: nodereuse.StateProvisioned, ConsumerRef: m})
			p.hosts[m] = h
		}
	}
	for i := 0; i < spare; i++ {
		hosts = append(hosts, nodereuse.Host{Name: fmt.Sprintf("bmh-%02d", n), State: nodereuse.StateAvailable})
		n++
	}
	store := fake.NewReuseHosts(hosts...)

	for _, p := range pools {
		fmt.Fprintf(w, "upgrade %s (nodeReuse=%v)\n", p.pool, p.reuse)
		old := sortedKeys(p.hosts)
		for i, m := range old {
			host := p.hosts[m]
			// Deprovision: label first, then release.
			h, err := get(ctx, store, host)
			if err != nil {
				return err
			}
			d, err := nodereuse.Deprovision(h, p.pool, p.reuse)
			if err != nil {
				return err
			}
			if d.SetLabel {
				if err := store.SetLabel(ctx, host, h.Version, d.Value); err != nil {
					return err
				}
			}
			if err := store.Update(host, func(h *nodereuse.Host) { h.State = nodereuse.StateDeprovisioning }); err != nil {
				return err
			}
			fmt.Fprintf(w, "  delete %-16s host %s deprovisioning (%s)\n", m, host, d.Reason)

			nm := fmt.Sprintf("%s-v2-%d", p.pool.Name, i)
			for round := 1; ; round++ {
				sel, err := nodereuse.Claim(ctx, store, nodereuse.Request{Pool: p.pool, Seed: seed + uint64(i)}, nm, 3)
				if err != nil {
					return err
				}
				if sel.Outcome == nodereuse.OutcomePick {
					fmt.Fprintf(w, "  create %-16s -> %s (%s)\n", nm, sel.Host, sel.Reason)
					// The old host finishes deprovisioning in any case.
					if err := store.Update(host, func(h *nodereuse.Host) {
						if h.State == nodereuse.StateDeprovisioning {
							h.State, h.ConsumerRef = nodereuse.StateAvailable, ""
						}
					}); err != nil {
						return err
					}
					break
				}
				fmt.Fprintf(w, "  create %-16s round %d: %s (%s)\n", nm, round, sel.Outcome, sel.Reason)
				if sel.Outcome == nodereuse.OutcomeNoHost || round > 5 {
					return fmt.Errorf("no host for %s", nm)
				}
				if round == 2 { // deprovisioning finishes
					if err := store.Update(host, func(h *nodereuse.Host) {
						h.State, h.ConsumerRef = nodereuse.StateAvailable, ""
					}); err != nil {
						return err
					}
				}
			}
		}
	}
	final, _ := store.List(ctx)
	fmt.Fprintln(w, "result:")
	for _, p := range pools {
		kept := 0
		for _, m := range sortedKeys(p.hosts) {
			var now string
			for _, h := range final {
				if h.ConsumerRef == nextName(m) {
					now = h.Name
				}
			}
			if now == p.hosts[m] {
				kept++
			}
			fmt.Fprintf(w, "  %-16s %s -> %-16s %s\n", m, p.hosts[m], nextName(m), now)
		}
		fmt.Fprintf(w, "  %s: %d of %d machines kept their host\n", p.pool, kept, len(p.hosts))
	}
	return nil
}

func nextName(m string) string { return m[:len(m)-4] + "v2" + m[len(m)-2:] }

func get(ctx context.Context, s *fake.ReuseHosts, name string) (nodereuse.Host, error) {
	hosts, err := s.List(ctx)
	if err != nil {
		return nodereuse.Host{}, err
	}
	for _, h := range hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return nodereuse.Host{}, fmt.Errorf("host %s not found", name)
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
