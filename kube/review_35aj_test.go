package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview35aj_IPMIAddressSpellingsAreTwoPoolBMCs (review 35aj, Low).
// Powers.controllerOf names an IPMI BMC to the Pool by
// net.JoinHostPort(t.Host, t.Port) straight from ParseBMCAddress, which
// keeps the host as written. The Redfish branch makes "a host name's case,
// an IPv6 address's form" one Endpoint (redfish.Origin); the IPMI branch
// does not: ipmi://BMC.example and ipmi://bmc.example:623, or
// ipmi://[::ffff:10.0.0.5] and ipmi://10.0.0.5, dial one UDP address but
// are two Pool BMCs (Target.BMC), so the Pool's per-BMC rules (one login
// at a time, MaxSessions, the login back-off keyed by Target.BMC through
// CredentialsKey) split across spellings of one BMC. Ground truth: DNS
// names are case-insensitive, and net parses both IP forms to one address.
func TestReview35aj_IPMIAddressSpellingsAreTwoPoolBMCs(t *testing.T) {
	pairs := [][2]string{
		{"ipmi://BMC.example", "ipmi://bmc.example:623"},
		{"ipmi://[::ffff:10.0.0.5]", "ipmi://10.0.0.5"},
		{"ipmi://[2001:DB8:0:0::1]:623", "ipmi://[2001:db8::1]"},
	}
	for _, p := range pairs {
		a, err := ParseBMCAddress(p[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseBMCAddress(p[1])
		if err != nil {
			t.Fatal(err)
		}
		if ia, ib := net.ParseIP(a.Host), net.ParseIP(b.Host); ia != nil && (ib == nil || !ia.Equal(ib)) {
			t.Fatalf("ground truth: %s and %s are not one address", a.Host, b.Host)
		}
		// The Pool's BMC name, as controllerOf builds it.
		na := net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
		nb := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		if na != nb {
			t.Errorf("%s and %s reach one IPMI BMC but are two Pool BMCs: Target.BMC %q and %q", p[0], p[1], na, nb)
		}
	}
}

// TestReview35aj_DeletedOperatorHostsRefusalKeptForever (review 35aj,
// issue 35 item 5: "the kube controller (host deleted ...) must forget
// what [it] no longer use[s]; memory after 100,000 hosts come and go
// returns to the baseline"). The RebootController notes, per host, the
// reboot annotations it last refused (refuseOnce: a host the
// baremetal-operator manages, whose reboot.metal3.io annotation the
// operator serves itself: every such reboot in an operator-managed fleet).
// When the host is deleted, Reconcile's NotFound path calls forget, which
// drops the reset outcome, Async's state and the Pool's entry, but not the
// refused entry (nor resetRefused, nor conflicts): with hosts coming and
// going, c.refused grows by one entry per deleted host, for ever.
func TestReview35aj_DeletedOperatorHostsRefusalKeptForever(t *testing.T) {
	ctx := context.Background()
	const n = 200
	var objs []client.Object
	for i := range n {
		objs = append(objs, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("h%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Annotations: map[string]string{reboot.Annotation: ""}}})
	}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	rc := &RebootController{Namespace: "ns", Client: c, Recorder: events.NewFakeRecorder(10 * n), Ownership: Ownership{},
		Reconciler: &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: "ns"}, Now: time.Now}}
	for i := range n {
		_, err := rc.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("h%d", i)}})
		require.NoError(t, err)
	}
	rc.refusedMu.Lock()
	before := len(rc.refused)
	rc.refusedMu.Unlock()
	require.Equal(t, n, before, "premise: every operator-managed host's reboot annotation was refused (and noted)")
	for _, o := range objs {
		require.NoError(t, c.Delete(ctx, o))
	}
	for i := range n {
		_, err := rc.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("h%d", i)}})
		require.NoError(t, err)
	}
	rc.refusedMu.Lock()
	after := len(rc.refused)
	rc.refusedMu.Unlock()
	assert.Zero(t, after, "every host is deleted and forgotten, yet the controller still keeps %d refused entries (one per deleted host)", after)
}
