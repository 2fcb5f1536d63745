package kube

import (
	"testing"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestRebootHostsConformance runs the reboot store conformance kit's
// contract checks on RebootHosts over a real API server (issue 40, point
// 4). The rapid state machine on this store is TestRebootStateMachineOnAPIServer's.
func TestRebootHostsConformance(t *testing.T) {
	needAPIServer(t)
	c := adminClient(t)
	reboottest.Contract(t, func(h reboot.Host) (reboottest.Stores, error) {
		ns := newNamespace(t, c)
		newBMH(t, c, ns, h.Name)
		return reboottest.Stores{Hosts: &RebootHosts{Client: c, Namespace: ns}}, nil
	})
}
