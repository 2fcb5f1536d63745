package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41e_DeletedWhileWaitingForNodePowersHostOffAgain: the checker
// deletes the remediation (the Node recovered in its eyes, or an operator
// gave up) after rebootkit powered the host on, while the remediation
// waits for the Node, which is slow to register. The seed's cancel rows:
// a cancelled remediation only brings the host and Node back. Here, once
// the attempt's timeout passes, the deleted remediation starts a retry: a
// new reboot request, and the reboot controller powers the running host
// off again (ground truth: an off after the deletion).
func TestReview41e_DeletedWhileWaitingForNodePowersHostOffAgain(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	retry := int32(1)
	spec := workerSpec(4 * time.Second)
	spec.RetryLimit = &retry
	n0 := e.nodeOf["h0"]
	e.blockKubelet("h0") // NotReady, and not registered again after the power cycle
	e.nhcCreate(n0, spec)
	e.eventually("host powered on, the remediation waiting for its Node", 60*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Phase == remediation.PhaseWaitingForNode.String() && e.hw["h0"].HardwareOn()
	})
	require.Equal(t, 1, e.offs("h0"))
	deleted := time.Now()
	require.NoError(t, e.checker.Delete(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0}}))
	time.Sleep(10 * time.Second)
	assert.False(t, e.hw["h0"].WasOffDuring(deleted, time.Now()),
		"h0 powered off after its remediation was deleted by its checker (ground truth: %d power-offs in all)\n%s", e.offs("h0"), e.dump())
}
