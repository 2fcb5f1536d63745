package kube

import (
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestRequestOwners: the controller's token is its Apply entry owning the
// bare request; entries of other managers (or of the same name with
// another operation) are others, and entries that do not own the request
// are nobody.
func TestRequestOwners(t *testing.T) {
	owns := metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:` + reboot.Annotation + `":{}}}}`)
	other := metav1.NewFieldsV1(`{"f:spec":{"f:online":{}}}`)
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fs *metav1.FieldsV1) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: fs, Time: &metav1.Time{Time: time.Unix(1, 0)}}
	}
	host := func(es ...metav1.ManagedFieldsEntry) *metal3.BareMetalHost {
		return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{ManagedFields: es}}
	}
	for _, tc := range []struct {
		name          string
		h             *metal3.BareMetalHost
		token, others bool
	}{
		{"nobody", host(entry("operator", metav1.ManagedFieldsOperationUpdate, other)), false, false},
		{"client only (not taken, or made again)", host(entry("kubectl", metav1.ManagedFieldsOperationUpdate, owns)), false, true},
		{"taken", host(entry("kubectl", metav1.ManagedFieldsOperationUpdate, owns), entry(resetTokenOwner, metav1.ManagedFieldsOperationApply, owns)), true, true},
		{"token alone (withdrawn by apply)", host(entry(resetTokenOwner, metav1.ManagedFieldsOperationApply, owns)), true, false},
		{"the token's name with Update is no token", host(entry(resetTokenOwner, metav1.ManagedFieldsOperationUpdate, owns)), false, true},
		{"token entry without the request", host(entry(resetTokenOwner, metav1.ManagedFieldsOperationApply, other),
			entry("kubectl", metav1.ManagedFieldsOperationUpdate, owns)), false, true},
	} {
		token, others := requestOwners(tc.h)
		assert.Equal(t, tc.token, token, tc.name)
		assert.Equal(t, tc.others, others, tc.name)
	}
}

// TestBrokenHold: an On reading of a host whose record carries fencing
// evidence records the hold broken, once per evidence; no evidence, or
// a reading other than On, records nothing.
func TestBrokenHold(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	ev := reboot.Status{LastPoweredOff: t0}
	got, ok := brokenHold(ev, power.StateOn, t0.Add(time.Second))
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), got.HoldBroken)
	assert.False(t, holdIntact(got), "broken: no evidence left to watch")
	assert.True(t, holdIntact(ev))
	_, ok = brokenHold(got, power.StateOn, t0.Add(2*time.Second))
	assert.False(t, ok, "once per evidence")
	_, ok = brokenHold(ev, power.StateOff, t0.Add(time.Second))
	assert.False(t, ok, "off: held")
	_, ok = brokenHold(ev, power.StateUnknown, t0.Add(time.Second))
	assert.False(t, ok, "unknown: nothing known")
	_, ok = brokenHold(reboot.Status{}, power.StateOn, t0)
	assert.False(t, ok, "no evidence: nothing to break")
	again := got
	again.LastPoweredOff = t0.Add(3 * time.Second) // evidence moved since
	_, ok = brokenHold(again, power.StateOn, t0.Add(4*time.Second))
	assert.True(t, ok, "new evidence, broken again")
}
