package kube

import (
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestResetRequestAnswers: a reset record answers only the request it was
// taken for; one removed and made again (a later time of its owner's
// managedFields entry, another value or another owner) is new.
func TestResetRequestAnswers(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	host := func(value, manager string, at time.Time) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{}
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, value)
		h.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "operator", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at.Add(time.Hour)},
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:online":{}}}`)},
			{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at},
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:` + reboot.Annotation + `":{}}}}`)},
		}
		return h
	}
	taken := requestOf(host("", "client", t0))
	assert.Equal(t, resetRequest{Value: "", Owners: []string{"client/Update/"}, At: t0}, taken, "the operator's entry does not own the request")
	assert.True(t, taken.answers(requestOf(host("", "client", t0))), "the same request")
	assert.False(t, taken.answers(requestOf(host("", "client", t0.Add(time.Second)))), "made again later")
	assert.False(t, taken.answers(requestOf(host("again", "client", t0))), "another value")
	assert.False(t, taken.answers(requestOf(host("", "other", t0))), "another owner")
	assert.True(t, resetRequest{}.answers(requestOf(host("x", "client", t0))), "a record from before identities were kept")
}
