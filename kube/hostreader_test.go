package kube

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// apiReader stands for the manager's API reader (only its identity
// matters here).
type apiReader struct{ client.Reader }

// TestRemediationHostsReadWithAPIReader: both remediation controllers read
// the hosts (request removal, held check) with the reader given for their
// own objects, the manager's API reader in the binary, not the client's
// cache (TestReview40m_CachedHostReadLeavesGoneMachineRequestForGood is
// what a cached read costs). Before, RebootHosts and OperatorHosts had no
// Reader and read through the client.
func TestRemediationHostsReadWithAPIReader(t *testing.T) {
	rd := &apiReader{}
	hostReaders := func(h remediation.HostStore) (client.Reader, client.Reader) {
		t.Helper()
		oh, ok := h.(*OwnedHosts)
		if !ok {
			t.Fatalf("hosts are %T, want *OwnedHosts", h)
		}
		return oh.Ours.(*remediation.RebootAPIHosts).Hosts.(*RebootHosts).Reader, oh.Operator.Reader
	}

	rem := NewRemediationReconciler(nil, "ns", Ownership{}, remediation.Config{}, remediation.MaxCount(1), time.Now)
	rem.Machines.(*Machines).Reader = rd
	ours, op := hostReaders(rem.Hosts)
	if r, ok := ours.(machinesReader); !ok || r.reader() != client.Reader(rd) {
		t.Fatalf("Machine remediation: RebootHosts.Reader %#v, want the Machines' reader", ours)
	}
	if r, ok := op.(machinesReader); !ok || r.reader() != client.Reader(rd) {
		t.Fatalf("Machine remediation: OperatorHosts.Reader %#v, want the Machines' reader", op)
	}

	xc := &ExternalRemediationController{Namespace: "ns", Reader: rd, Limit: remediation.MaxCount(1)}
	rec := xc.reconciler(v1alpha1.PowerCycleRemediationSpec{})
	ours, op = hostReaders(rec.Hosts.(externalHosts).HostStore)
	if ours != client.Reader(rd) || op != client.Reader(rd) {
		t.Fatalf("external remediation: RebootHosts.Reader %#v, OperatorHosts.Reader %#v, want the controller's Reader", ours, op)
	}
}
