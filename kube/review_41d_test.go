package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestExternalRemediation_TwoForOneHostUnderLimitOne (found by
// TestExternalRemediationStateMachine, testdata/rapid/...-15578.fail):
// h0's Node hangs and two checkers each create a remediation of it; the
// storm guard's limit is 1 and h0 is the only unhealthy host. The guard
// counted each remediation as an unhealthy machine ("2 of N machines
// unhealthy, more than the limit 1"), so neither started and h0 was
// never remediated, for as long as both checkers kept theirs.
func TestExternalRemediation_TwoForOneHostUnderLimitOne(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	n0 := e.nodeOf["h0"]
	start := e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	f := false
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0 + "-other",
		Annotations:     map[string]string{v1alpha1.NodeNameAnnotation: n0},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "remediation.medik8s.io/v1alpha1", Kind: "NodeHealthCheck", Name: "other", UID: "uid-other", Controller: &f}}},
		Spec: workerSpec(time.Minute)}))
	e.eventually("h0 power-cycled by one of its two remediations (ground truth)", 30*time.Second, func() bool {
		return e.hw["h0"].WasOffDuring(start, time.Now())
	})
	_, whileOn := e.fc.counts()
	require.Empty(t, whileOn)
	require.False(t, e.hw["h1"].WasOffDuring(start, time.Now()), "h1 powered off")
}
