package kube

import (
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestPinnedOnEligible: the power-on owed through a pinned BMC follows
// the reboot package's rule: never while spec.online is false, the host
// is being deprovisioned or carries a request.
func TestPinnedOnEligible(t *testing.T) {
	host := func(f func(*metal3.BareMetalHost)) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: metal3.BareMetalHostSpec{Online: true}}
		f(h)
		return h
	}
	assert.Empty(t, onEligible(host(func(*metal3.BareMetalHost) {})))
	for what, f := range map[string]func(*metal3.BareMetalHost){
		"online false":   func(h *metal3.BareMetalHost) { h.Spec.Online = false },
		"deprovisioning": func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateDeprovisioning },
		"deleting":       func(h *metal3.BareMetalHost) { h.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
		"keyed request":  func(h *metal3.BareMetalHost) { h.Annotations = map[string]string{reboot.AnnotationPrefix + "k": "{}"} },
		"bare request":   func(h *metal3.BareMetalHost) { h.Annotations = map[string]string{reboot.Annotation: ""} },
	} {
		assert.NotEmpty(t, onEligible(host(f)), what)
	}
}

// TestPinnedOnBackoff: failed attempts are retried 1 s, 2 s, 4 s ... after
// their end, at most a minute.
func TestPinnedOnBackoff(t *testing.T) {
	end := time.Unix(1000, 0)
	for fails, want := range map[int]time.Duration{0: time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 6: time.Minute, 50: time.Minute} {
		assert.Equal(t, want, (&pinnedOn{end: end, fails: fails}).retryAt().Sub(end), "after %d failures", fails)
	}
}
