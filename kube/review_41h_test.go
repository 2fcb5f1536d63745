package kube

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41_UpgradeAdmitsBeforeMigration: an upgrade from the version
// that kept the external admissions in ExternalAdmissionsName. The old
// record admits r-gone (its checker deleted it; its request on h0, h0
// off, h0's BMC refusing the power-on: held). MaxCount(1). While the old
// version was down for the upgrade, NodeHealthCheck created the
// remediation of h1's hung Node. The new process's workers reconcile it
// at once, but migrateAdmissions runs only in the restore loop, after
// its first tick (restoreLoop waits on the ticker before its first
// pass; 5 s by default) and concurrently with the workers: the passes
// below are what the workers do in that window (no migration yet). The
// remediation of h1 is admitted by a storm guard and a host lock that do
// not see the old record's admission, and h1 is powered off while h0 is
// off: two hosts down with MaxCount(1). Ground truth: the fake power of
// both hosts; the shared record read directly.
func TestReview41_UpgradeAdmitsBeforeMigration(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	e.stopCtl() // the old version, stopped for the upgrade
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	require.NoError(t, e.hw["h0"].Off(e.ctx, power.ModeHard))
	e.eventually("h0 off", 5*time.Second, func() bool { return !e.hw["h0"].HardwareOn() })

	// The old version's record: r-gone admitted, its request on h0.
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	v := remediation.RebootValue("uid-gone", at)
	require.NoError(t, e.direct.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ExternalAdmissionsName},
		Data: map[string]string{"machines": `["r-gone"]`,
			"requests": `{"r-gone":{"value":` + jsonString(v) + `,"at":"` + at.Format(time.RFC3339) + `","host":"h0"}}`,
			"members":  `{"r-gone":{"wrote":true}}`}}))
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	if bmh.Annotations == nil {
		bmh.Annotations = map[string]string{}
	}
	bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey] = v
	require.NoError(t, e.direct.Update(e.ctx, bmh))

	// During the upgrade: h1's Node hangs, NodeHealthCheck creates its
	// remediation.
	n1 := e.nodeOf["h1"]
	e.hang("h1")
	e.nhcCreate(n1, workerSpec(time.Minute))

	// The new version's workers, before the restore loop's first tick.
	xc := &ExternalRemediationController{Client: e.direct, Namespace: e.ns, Ownership: Ownership{NoOperator: true},
		Limit: e.limit, PollInterval: 200 * time.Millisecond,
		Power: func(h string) (power.Controller, error) { return e.hw[h], nil }, StaleReads: e.rcfg.StaleReads}
	for i := 0; i < 10 && !e.held("h1"); i++ {
		_, err := xc.Reconcile(e.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: n1}})
		t.Logf("pass %d: %v", i, err)
		time.Sleep(20 * time.Millisecond)
	}
	// The rest of the new process (its reboot controller, its restore
	// loop that migrates, its sweep).
	start := time.Now()
	e.startControllers()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	a, _ := shared.GetAdmissions(e.ctx)
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"h1 was powered off while h0 is off and held by the old record's admission of r-gone (MaxCount(1)): the new version admitted "+
			"h1's remediation before migrateAdmissions moved r-gone into the shared record (shared now %v)\n%s", a.Machines, e.dump())
}
