package nodereuse_test

import (
	"fmt"

	"github.com/rebootkit/rebootkit/nodereuse"
)

// Two machines of md-workers look for hosts: the first gets the host the
// pool released, the second falls back to a free one; a host reserved for
// another pool is never touched.
func ExampleSelectN() {
	hosts := []nodereuse.Host{
		{Name: "bmh-0", State: nodereuse.StateAvailable, Labels: map[string]string{nodereuse.Label: "md-workers"}},
		{Name: "bmh-1", State: nodereuse.StateAvailable, Labels: map[string]string{nodereuse.Label: "kcp-cp"}},
		{Name: "bmh-2", State: nodereuse.StateAvailable},
	}
	sel, err := nodereuse.SelectN(hosts, nodereuse.Request{Pool: nodereuse.MachineDeployment("workers"), Seed: 1}, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, s := range sel {
		fmt.Printf("machine %d: %s %s removeLabel=%v (%s)\n", i, s.Outcome, s.Host, s.RemoveLabel, s.Reason)
	}
	// Output:
	// machine 0: pick bmh-0 removeLabel=true (host reserved for md-workers)
	// machine 1: pick bmh-2 removeLabel=false (no host reserved for md-workers: random free host)
	// machine 2: no-host  removeLabel=false (no usable host)
}
