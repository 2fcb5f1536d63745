package kube

import (
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41_RestoreLoopWithoutLeaseWritesNothing: the README says the
// external remediation controller "runs under the reboot controller's
// lease (ExternalRemediationController.Guard: a process that lost its
// lease writes nothing)". Its restore loop (SetupWithManager adds it as a
// Runnable) never asks the Guard: a process without its lease restores
// kept Node backups (adds labels, removes the out-of-service taint) and
// rewrites the admissions ConfigMap. Ground truth: direct API reads of
// the Node and the ConfigMap.
func TestReview41_RestoreLoopWithoutLeaseWritesNothing(t *testing.T) {
	g := &switchGuard{} // never the leader
	e := newExtEnvGuarded(t, []string{"h0"}, remediation.MaxCount(1),
		reboot.Config{StaleReads: 500 * time.Millisecond, SoftTimeout: 2 * time.Second}, g)
	n0 := e.nodeOf["h0"]
	// A kept backup (as report keeps it for a remediation that went
	// while its Node was gone) and the Node, back, tainted by rebootkit.
	var node corev1.Node
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKey{Name: n0}, &node))
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: remediation.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	require.NoError(t, e.direct.Update(e.ctx, &node))
	raw, err := json.Marshal(map[string]pendingRestore{n0: {Backup: &remediation.NodeBackup{Name: n0, Labels: map[string]string{"review41": "restored"}}, Tainted: true}})
	require.NoError(t, err)
	require.NoError(t, e.direct.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ExternalAdmissionsName},
		Data: map[string]string{nodeBackupsKey: string(raw)}}))

	time.Sleep(3 * time.Second) // the restore loop polls every 200 ms

	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKey{Name: n0}, &node))
	assert.NotContains(t, node.Labels, "review41", "a controller without its lease restored labels on %s", n0)
	tainted := false
	for _, tt := range node.Spec.Taints {
		tainted = tainted || tt.Key == remediation.OutOfServiceTaint
	}
	assert.True(t, tainted, "a controller without its lease removed the out-of-service taint of %s", n0)
	var cm corev1.ConfigMap
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: ExternalAdmissionsName}, &cm))
	assert.Equal(t, string(raw), cm.Data[nodeBackupsKey], "a controller without its lease rewrote the admissions ConfigMap")
}

// TestReview41_StormGuardSharedWithMachineRemediation: rebootkit-controller
// --controllers reboot,remediation,external-remediation runs the
// Machine-annotation remediation and the external remediation with the
// same --remediation-limit ("storm guard: at most this many Machines
// under remediation at once"; ExternalRemediationController.Limit: "the
// storm guard's limit across all remediations of the namespace"), but each
// counts only its own admission record (rebootkit-remediation-admissions
// vs ExternalAdmissionsName). With limit 1 and the Machine remediation
// holding its one slot (host h1 under remediation), a PowerCycleRemediation
// of h0 is admitted and h0 powered off: two hosts off with limit 1.
// Ground truth: h0's fake power.
func TestReview41_StormGuardSharedWithMachineRemediation(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	// The Machine-annotation remediation of the same process has admitted
	// the Machine of h1 (its one slot under --remediation-limit=1).
	ma := &Admissions{Client: e.direct, Namespace: e.ns}
	adm, err := ma.GetAdmissions(e.ctx)
	require.NoError(t, err)
	adm.Machines = append(adm.Machines, "machine-h1")
	require.NoError(t, ma.PutAdmissions(e.ctx, adm))
	_ = e.hw["h1"].Off(e.ctx, power.ModeHard) // and powered h1 off

	start := time.Now()
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	time.Sleep(8 * time.Second)
	assert.False(t, e.hw["h0"].WasOffDuring(start, time.Now()),
		"h0 powered off by the external remediation while the Machine remediation held the storm guard's only slot (limit 1): two hosts off")
}

// TestReview41_ExternalWaitsForMachineRemediationOfSameHost: "At most one
// remediation holds a host (the admission record is a lock per host:
// ErrHostHeld)". The lock is only over the external record: with the
// Machine-annotation remediation (same process, --controllers
// reboot,remediation,external-remediation) holding host h0 (admitted, its
// reboot request on h0's BareMetalHost), a PowerCycleRemediation of h0's
// Node is admitted and replaces that request with its own: two
// remediations acting on one host. Ground truth: a direct read of the
// BareMetalHost's request annotation.
func TestReview41_ExternalWaitsForMachineRemediationOfSameHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(2))
	key := reboot.AnnotationPrefix + remediation.RebootKey
	at := time.Now()
	theirs := remediation.RebootValue("machine-uid-h0", at)
	ma := &Admissions{Client: e.direct, Namespace: e.ns}
	adm, err := ma.GetAdmissions(e.ctx)
	require.NoError(t, err)
	adm.Machines = append(adm.Machines, "machine-h0")
	adm.Requests = map[string]remediation.Request{"machine-h0": {Value: theirs, At: at, Host: "h0"}}
	require.NoError(t, ma.PutAdmissions(e.ctx, adm))
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	if bmh.Annotations == nil {
		bmh.Annotations = map[string]string{}
	}
	bmh.Annotations[key] = theirs
	require.NoError(t, e.direct.Update(e.ctx, bmh))

	n0 := e.nodeOf["h0"]
	e.nhcCreate(n0, workerSpec(time.Minute))
	seen := map[string]bool{}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
		seen[bmh.Annotations[key]] = true
	}
	for v := range seen {
		assert.True(t, v == theirs || v == "",
			"the external remediation of %s wrote its own reboot request %q on h0, which the Machine remediation holds (its request %q)", n0, v, theirs)
	}
	// The one record both controllers share (read uncached): the
	// PowerCycleRemediation is not admitted while machine-h0 holds h0.
	ext, err := (&Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}).GetAdmissions(e.ctx)
	require.NoError(t, err)
	r := e.remediationOf(n0)
	assert.False(t, ext.Has(r.Name), "PowerCycleRemediation %s admitted while the Machine remediation holds h0: %+v", r.Name, ext)
	assert.Equal(t, "h0", ext.Others["machine-h0"], "the external remediation reads machine-h0's admission, and its host, from the shared record")
	assert.Contains(t, r.Status.Message, "held", "the remediation says what it waits for: %+v", r.Status)
}

// TestReview41_FailedDeletedKeepsFinalizerWhileHostOff: h0's BMC refuses
// the power-on; the remediation fails (attempts ran out) and, as the README
// promises, keeps Processing True and its finalizer while h0 is off. The
// checker then deletes it (NodeHealthCheck's own timeout, the Node
// deleted, an operator): decide "clears" the failed remediation to
// PhaseNone, for which remediation.LastRequest is the zero Request, so
// report's Held reads the host for no request, finds nothing held, and
// the finalizer and the admission (the per-host lock, the storm guard's
// count) go with h0 still off and rebootkit's reboot still pending on it
// (ground truth: the fake power). The next remediator acts on a host
// rebootkit still means to power on.
func TestReview41_FailedDeletedKeepsFinalizerWhileHostOff(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	retry := int32(0)
	spec := workerSpec(3 * time.Second)
	spec.RetryLimit = &retry
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(n0, spec)
	e.eventually("the remediation failed", 60*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Phase == "failed"
	})
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	r := e.remediationOf(n0)
	require.Equal(t, metav1.ConditionTrue, condition(r, v1alpha1.ConditionProcessing), "precondition: Processing True while h0 is off")
	require.NoError(t, e.checker.Delete(e.ctx, r)) // the checker lets it go
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
		r := e.remediationOf(n0)
		require.NotNil(t, r, "the remediation of %s is gone (finalizer removed) while h0 is off and rebootkit still means to power it on (ground truth)\n%s", n0, e.dump())
		require.True(t, slices.Contains(r.Finalizers, ReleaseFinalizer), "finalizer gone while h0 is off\n%s", e.dump())
	}
}
