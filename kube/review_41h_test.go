package kube

import (
	"slices"
	"strings"
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
	// Once migrated, r-gone may be released by its gone pass (its
	// request removed, h0's record showing no power-off after it): from
	// then on h1 may be admitted. So h1 must not be off at any time r-gone
	// was seen still admitted (in the shared record, or unmoved in the
	// old one), not over the whole wait (which flaked under load).
	start := time.Now()
	lastAdmitted := start
	e.startControllers()
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	var a remediation.Admissions
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		seen := time.Now()
		got, err := shared.GetAdmissions(e.ctx)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		a = got
		var old corev1.ConfigMap
		unmoved := false
		if err := e.direct.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: ExternalAdmissionsName}, &old); err == nil {
			unmoved = strings.Contains(old.Data["machines"], `"r-gone"`)
		}
		if !slices.Contains(a.Machines, "r-gone") && !unmoved {
			break
		}
		lastAdmitted = seen
		if e.hw["h1"].WasOffDuring(start, lastAdmitted) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	assert.False(t, e.hw["h1"].WasOffDuring(start, lastAdmitted),
		"h1 was powered off while h0 is off and held by the old record's admission of r-gone (MaxCount(1)): the new version admitted "+
			"h1's remediation before migrateAdmissions moved r-gone into the shared record (shared now %v)\n%s", a.Machines, e.dump())
}

// TestReview41_MachineRemediationLocksOutLegacyHeldHost: the host lock
// across both controllers ("at most one remediation,
// Machine-annotation or PowerCycleRemediation, holds a host") reads the
// external section of the shared record only. Until the external
// controller's restore loop has migrated the old record (its first tick,
// or never if the binary runs without --controllers
// external-remediation), a PowerCycleRemediation admitted in
// ExternalAdmissionsName with its request on h0 holds nothing the
// Machine remediation can see: the Machine remediation's admission
// store (the one NewRemediationReconciler wires) admits a Machine of h0
// while h0 carries the old remediation's request. Ground truth: h0's
// reboot request, read directly.
func TestReview41_MachineRemediationLocksOutLegacyHeldHost(t *testing.T) {
	needAPIServer(t)
	c := adminClient(t)
	ns := newNamespace(t, c)
	bmh := newBMH(t, c, ns, "h0")
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	v := remediation.RebootValue("uid-gone", at)
	require.NoError(t, c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ExternalAdmissionsName},
		Data: map[string]string{"machines": `["r-gone"]`,
			"requests": `{"r-gone":{"value":` + jsonString(v) + `,"at":"` + at.Format(time.RFC3339) + `","host":"h0"}}`,
			"members":  `{"r-gone":{"wrote":true}}`}}))
	if bmh.Annotations == nil {
		bmh.Annotations = map[string]string{}
	}
	bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey] = v
	require.NoError(t, c.Update(t.Context(), bmh))

	rec := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{}, remediation.MaxCount(2), time.Now)
	m, err := rec.Admissions.GetAdmissions(t.Context())
	require.NoError(t, err)
	now := time.Now()
	m.Machines = append(m.Machines, "machine-h0")
	m.Requests = map[string]remediation.Request{"machine-h0": {Value: remediation.RebootValue("machine-uid-h0", now), At: now, Host: "h0"}}
	err = rec.Admissions.PutAdmissions(t.Context(), m)
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(bmh), bmh))
	require.Equal(t, v, bmh.Annotations[reboot.AnnotationPrefix+remediation.RebootKey], "precondition: r-gone's request still on h0")
	assert.ErrorIs(t, err, ErrHostHeld,
		"the Machine remediation admitted machine-h0 on h0 while the PowerCycleRemediation r-gone's admission (the old record, not yet migrated) "+
			"and its request hold h0")
}

// TestReview41_LegacyGoneAdmissionWaitsForNextSweep: the sweep runs at
// start, before the restore loop's first tick migrates the old record;
// a gone remediation moved in by the migration is therefore first
// reconciled at the next sweep, SweepEvery (one minute by default)
// later. r-gone never wrote a request (Member.Wrote false: released at
// once by its gone pass), yet after the upgrade it holds the storm
// guard's slot (MaxCount(1)) for about a minute: h1's remediation waits
// meanwhile. Ground truth: the shared record read directly.
func TestReview41_LegacyGoneAdmissionWaitsForNextSweep(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	e.stopCtl()
	require.NoError(t, e.direct.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ExternalAdmissionsName},
		Data: map[string]string{"machines": `["r-gone"]`, "requests": `{}`, "members": `{"r-gone":{}}`}}))
	e.startControllers()
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	e.eventually("migrated", 10*time.Second, func() bool {
		a, err := shared.GetAdmissions(e.ctx)
		return err == nil && a.Has("r-gone")
	})
	deadline := time.Now().Add(15 * time.Second)
	var a remediation.Admissions
	for time.Now().Before(deadline) {
		a, _ = shared.GetAdmissions(e.ctx)
		if !a.Has("r-gone") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	assert.False(t, a.Has("r-gone"),
		"r-gone, gone and holding nothing, still admitted 15 s (75 poll intervals) after its migration: the start sweep ran before the "+
			"migration and the next is SweepEvery later: %+v", a)
}
