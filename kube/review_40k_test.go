package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40k_HostLockFreezesSectionOnDriftedHost: hostlock.go's
// doc: "a record naming two remediations of one host, of either
// controller, is never written (ErrHostHeld)", with a Machine entry's
// host "the one its recorded request names ..., else the one hostOf
// names for it now". The check runs over every entry of the record
// written, not over the entry the write adds or changes. A Machine m
// admitted while it had no host (HostOf ""; remediation.Member.Wrote
// false, no Admissions.Requests entry) whose BareMetalHost hm is linked
// afterwards, while a PowerCycleRemediation p holds hm (Others: p's
// section read m's host as "", so its own admission passed), makes every
// write of the Machine section fail with ErrHostHeld (hostlock.go:43-56,
// hostOf(m) = hm against holder[hm] = p): not only m's own request (the
// lock's purpose) but the admission of an unrelated Machine x on host hx
// within the limit, and every other Machine's release, member and
// request record, for as long as p holds hm (for good if hm's BMC never
// powers on: the admitted case that was to cost one slot now freezes the
// whole section). Ground truth: x's host hx never gets a request, its
// remediation never starts.
func TestReview40k_HostLockFreezesSectionOnDriftedHost(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewCluster()
	cl.AddMachine(remediation.Machine{Name: "m", UID: "uid-m", NodeName: "m", Cluster: "c"})
	cl.AddMachine(remediation.Machine{Name: "x", UID: "uid-x", NodeName: "x", Cluster: "c"})
	for _, n := range []string{"m", "x", "y", "z"} {
		cl.PutNode(remediation.Node{Name: n, UID: "n-" + n, Ready: true})
	}
	for _, n := range []string{"y", "z"} {
		cl.AddMachine(remediation.Machine{Name: n, UID: "uid-" + n, NodeName: n, Cluster: "c"})
	}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "hm", Online: true}, reboot.Host{Name: "hx", Online: true},
		reboot.Host{Name: "hy", Online: true}, reboot.Host{Name: "hz", Online: true})
	var mu sync.Mutex
	hostOfM := map[string]string{"m": "", "x": "hx", "y": "hy", "z": "hz"}
	hostOf := func(_ context.Context, machine string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		h, ok := hostOfM[machine]
		if !ok {
			return "", remediation.ErrNotFound
		}
		return h, nil
	}
	rem := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Now: time.Now,
		Admissions: &hostAdmissions{AdmissionStore: cl, hostOf: hostOf},
		Hosts:      &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: hostOf, HostsMayVanish: true},
		Limit:      remediation.MaxCount(3), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute}}

	// m is found unhealthy while it has no host: admitted, no request.
	cl.SetNodeReady("m", false)
	cl.SetNeedsRemediation("m", true)
	_, err := rem.Reconcile(ctx, "m")
	require.NoError(t, err)
	adm, err := cl.GetAdmissions(ctx)
	require.NoError(t, err)
	require.True(t, adm.Has("m"), "precondition: m admitted with no host")
	require.Empty(t, adm.Requests["m"].Host, "precondition: m recorded no request")

	// A PowerCycleRemediation p is admitted with its request on hm (its
	// section's check read m's host as ""), then hm is linked to m.
	adm.Others = map[string]string{"p": "hm"}
	require.NoError(t, cl.PutAdmissions(ctx, adm))
	mu.Lock()
	hostOfM["m"] = "hm"
	mu.Unlock()
	_, err = rem.Reconcile(ctx, "m")
	t.Logf("m's pass (waits for p's hold on hm: correct): %v", err)

	// x, on its own host hx, is found unhealthy: 3 of 4 (m, p, x) within
	// MaxCount(3).
	cl.SetNodeReady("x", false)
	cl.SetNeedsRemediation("x", true)
	var lastErr error
	for i := 0; i < 5; i++ {
		_, lastErr = rem.Reconcile(ctx, "x")
		time.Sleep(20 * time.Millisecond)
	}
	h, err := hosts.Get(ctx, "hx")
	require.NoError(t, err)
	_, requested := h.Annotations[remediation.RebootAnnotation]
	adm, _ = cl.GetAdmissions(ctx)
	if !adm.Has("x") || !requested {
		t.Fatalf("x (host hx, held by no one; 3 unhealthy within MaxCount(3)) was never admitted nor its request written (admissions %+v, hx annotations %v): every write of the Machine section fails because m, admitted with no host, now maps to hm, which p holds: %v",
			adm, h.Annotations, lastErr)
	}
}

// TestReview40k_OperatorHostGoneMachineReleasedWhileOff: doc.go
// (remediation): a Machine deleted mid-remediation has its request
// removed and "its admission released only once that host is no longer
// held for that request (Held: the request on it, a reboot pending, or
// off after the request and not powered on since; read on the recorded
// host through the recorded request, RequestReader ...)"; kube's
// OperatorHosts now is a RequestReader for this. But OperatorHosts.read
// (operator.go:161-200) never sets Host.OffAfterRequest nor
// Host.RebootPending, so held (remediation/held.go) is just Requested
// for a host the baremetal-operator drives: once the request is removed
// the gone Machine's admission is released in the same pass while the
// operator still shows the host off (status.poweredOn false, written
// after the request) and has not powered it on (slow, or its BMC
// refusing: the fault still on). With MaxCount(1) a second Machine is
// admitted and its host's request written while h1 is off. The same
// applies to a live Machine's over-but-held remediation (keeps).
// Ground truth: the BareMetalHost's status as the operator wrote it.
func TestReview40k_OperatorHostGoneMachineReleasedWhileOff(t *testing.T) {
	ctx := context.Background()
	w := newOperatorWorld(t, 2, time.Second, nil)

	w.unhealthy("m1")
	h, _ := w.firstRequest(ctx)
	// The operator powers h1 off for the request (and does no more: its
	// power-on is slow, or h1's BMC refuses it).
	w.statusLater("h1", false, nil)

	w.deleteMachine(ctx, "m1", 3)
	w.get(ctx, "h1", &h)
	require.NotContains(t, h.Annotations, remediation.RebootAnnotation, "precondition: the gone Machine's request is removed from h1")
	require.False(t, h.Status.PoweredOn, "precondition: the operator still shows h1 off")

	adm := w.secondUnhealthy(ctx)
	m2Req := w.requested(ctx, "h2")
	if !adm.Has("m1") || adm.Has("m2") || m2Req {
		t.Fatalf("limit MaxCount(1): gone m1's admission was released (admissions %v) while h1, which its request had the operator power off, is still off (status.poweredOn %v, never powered on since), and m2 was admitted with its request on h2 (%v): two hosts off",
			adm.Machines, h.Status.PoweredOn, m2Req)
	}
}
