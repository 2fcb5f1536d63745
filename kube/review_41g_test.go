package kube

import (
	"context"
	"sync"
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
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// keepRacer is the controller's client with a second writer of the old
// ConfigMap ExternalAdmissionsName: right after the migration's first
// write (the shared record's Patch), report keeps a Node backup there
// (nodeBackups.keep, as for a remediation deleted while its Node is
// gone), once. No crash: two writers of one process.
type keepRacer struct {
	client.Client
	ns   string
	once sync.Once
}

func (k *keepRacer) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := k.Client.Patch(ctx, obj, patch, opts...)
	k.after(ctx, obj, err)
	return err
}

func (k *keepRacer) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := k.Client.Create(ctx, obj, opts...)
	k.after(ctx, obj, err)
	return err
}

func (k *keepRacer) after(ctx context.Context, obj client.Object, err error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && err == nil && cm.Name == "rebootkit-remediation-admissions" {
		k.once.Do(func() {
			b := &nodeBackups{Client: k.Client, Namespace: k.ns}
			_ = b.keep(ctx, "some-node", pendingRestore{Tainted: true})
		})
	}
}

// TestReview41_MigrationReadmitsReleasedGoneRemediation: migrateAdmissions
// says a failed second write "adds them again at the next pass: an
// admission released in between is then held again until its
// remediation's next pass releases it". A PowerCycleRemediation that is
// gone has no next pass: the external controller has no sweep of the
// shared record (the Machine remediation has one, Sweep), and its gone
// pass that released the admission returned clean, so the work queue
// forgets it. The second write fails without any crash: report keeps a
// Node backup in the same old ConfigMap (a concurrent writer of one
// process), the migration's compare-and-swap on it conflicts. The gone
// remediation r-gone (its host h0 on, nothing pending) is released by its
// gone pass, then the next restore-loop tick adds it back to the shared
// record, where it stays: the storm guard counts it (MaxCount(1): no other
// remediation is ever admitted) and h0 stays locked. Ground truth: an
// uncached read of the shared record.
func TestReview41_MigrationReadmitsReleasedGoneRemediation(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h0")
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	v := remediation.RebootValue("uid-gone", at)
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ExternalAdmissionsName},
		Data: map[string]string{"machines": `["r-gone"]`,
			"requests": `{"r-gone":{"value":` + jsonString(v) + `,"at":"` + at.Format(time.RFC3339) + `","host":"h0"}}`,
			"members":  `{"r-gone":{"wrote":true}}`}}))

	ctl := &ExternalRemediationController{Client: &keepRacer{Client: c, ns: ns}, Namespace: ns, Ownership: Ownership{NoOperator: true},
		Limit: remediation.MaxCount(1), PollInterval: 200 * time.Millisecond}
	// Restore-loop tick 1: moved into the shared record; the old
	// ConfigMap's write conflicts with report's keep.
	err := ctl.migrateAdmissions(ctx)
	t.Logf("first migration: %v", err)
	shared := &Admissions{Client: c, Namespace: ns, Section: SectionExternal}
	a, err := shared.GetAdmissions(ctx)
	require.NoError(t, err)
	require.True(t, a.Has("r-gone"), "moved into the shared record: %+v", a)

	// The gone remediation's pass (its delete event, or the first pass
	// after the upgrade): h0 is not held, the admission is released.
	res, err := ctl.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r-gone"}})
	require.NoError(t, err, "the gone pass is clean: nothing requeues it (%+v)", res)
	a, err = shared.GetAdmissions(ctx)
	require.NoError(t, err)
	require.False(t, a.Has("r-gone"), "released by its gone pass: %+v", a)

	// Restore-loop tick 2.
	require.NoError(t, ctl.migrateAdmissions(ctx))
	a, err = shared.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.False(t, a.Has("r-gone"),
		"PowerCycleRemediation r-gone is gone and was released, but the migration admitted it again; nothing ever reconciles a gone "+
			"remediation again (no sweep), so it holds the storm guard's slot and host h0's lock for good: %+v", a)
}

func jsonString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		if r == '"' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '"'))
}

// TestReview41_GoneRemediationAdmissionLostOnRestart: "a pass over a
// deleted PowerCycleRemediation whose admission is kept is retried with
// back-off" (the work queue's, in memory only). h0's BMC refuses the
// power-on; the remediation of h0's Node is stuck with h0 off and the
// operator gives up on it (the checker deletes it, the operator removes
// the finalizer by hand: the way to give up on one server). Its gone pass
// keeps the admission (h0 held: ErrHostHeld) and is retried with back-off.
// The controller then restarts (a leader failover): the back-off is lost,
// no event names a deleted object, and the external controller has no
// sweep of the shared record (the Machine remediation has Sweep for
// exactly this). h0's BMC recovers and h0 is on again; yet the admission
// of the gone remediation is never released: with MaxCount(1) the
// remediation of h1's Node (hung) is never admitted, and h1 is never
// power-cycled. Ground truth: h1's fake power, and an uncached read of
// the shared record.
func TestReview41_GoneRemediationAdmissionLostOnRestart(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	n0, n1 := e.nodeOf["h0"], e.nodeOf["h1"]
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(time.Minute))
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	e.eventually("h0 off under its admitted remediation", 30*time.Second, func() bool {
		a, err := shared.GetAdmissions(e.ctx)
		return err == nil && a.Has(n0) && e.offs("h0") > 0 && !e.hw["h0"].HardwareOn()
	})
	// The operator gives up on h0's remediation.
	r := e.remediationOf(n0)
	require.NoError(t, e.checker.Delete(e.ctx, r))
	e.eventually("the finalizer removed by hand", 10*time.Second, func() bool {
		r := e.remediationOf(n0)
		if r == nil {
			return true
		}
		_ = e.direct.Patch(e.ctx, r, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		return false
	})
	time.Sleep(2 * time.Second) // its gone pass: kept (h0 off), retried with back-off
	a, err := shared.GetAdmissions(e.ctx)
	require.NoError(t, err)
	require.True(t, a.Has(n0), "precondition: the gone remediation keeps its admission while h0 is off: %+v", a)

	e.restart() // leader failover
	refuseOn.Store(false)
	e.eventually("h0 on again (the reboot controller, or the operator by hand)", 20*time.Second, func() bool {
		if !e.hw["h0"].HardwareOn() {
			_ = e.hw["h0"].On(e.ctx)
		}
		return e.hw["h0"].HardwareOn()
	})

	start := time.Now()
	e.hang("h1")
	e.nhcCreate(n1, workerSpec(time.Minute))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	a, _ = shared.GetAdmissions(e.ctx)
	assert.True(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"h0 is on and its remediation gone for 30 s, yet h1's remediation is never admitted (MaxCount(1)): the gone remediation's "+
			"admission %v was kept across the restart and nothing releases it\n%s", a.Machines, e.dump())
	assert.False(t, a.Has(n0), "the gone remediation %s is still admitted 30 s after h0 is on: %+v", n0, a)
}

// TestReview41_SoftRemediationNotLockedAcrossControllers: the README says
// "a PowerCycleRemediation waits for a host the Machine remediation holds
// (and the other way round)". The other way round holds only for a hard
// remediation: the Machine remediation's lock reads the external
// section's hosts from their recorded requests (Others), and a soft
// remediation (spec.mode soft) records none: its HostStore is softHosts,
// which is not a remediation.RequestRemover, so the Reconciler clears
// Host.Name, State.Host stays "" and no request is recorded with the
// admission. With a soft PowerCycleRemediation admitted on h0 and its
// reboot request on h0, the Machine remediation's store (the one
// NewRemediationReconciler wires) accepts the admission of a Machine of
// h0: two remediations hold one host. Ground truth: a direct read of h0's
// reboot request and of the shared record.
func TestReview41_SoftRemediationNotLockedAcrossControllers(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(2))
	n0 := e.nodeOf["h0"]
	e.blockKubelet("h0") // a slow boot: the remediation stays in flight
	spec := workerSpec(time.Minute)
	spec.Mode = "soft"
	e.nhcCreate(n0, spec)
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	e.eventually("the soft remediation admitted, its request on h0", 20*time.Second, func() bool {
		a, err := shared.GetAdmissions(e.ctx)
		return err == nil && a.Has(n0) && e.held("h0")
	})
	ext, err := shared.GetAdmissions(e.ctx)
	require.NoError(t, err)
	t.Logf("external section: %+v", ext)

	rec := NewRemediationReconciler(e.direct, e.ns, Ownership{NoOperator: true}, remediation.Config{}, remediation.MaxCount(2), time.Now)
	m, err := rec.Admissions.GetAdmissions(e.ctx)
	require.NoError(t, err)
	at := time.Now()
	m.Machines = append(m.Machines, "machine-h0")
	m.Requests = map[string]remediation.Request{"machine-h0": {Value: remediation.RebootValue("machine-uid-h0", at), At: at, Host: "h0"}}
	err = rec.Admissions.PutAdmissions(e.ctx, m)
	require.True(t, e.held("h0"), "precondition: the soft remediation's request is still on h0")
	assert.ErrorIs(t, err, ErrHostHeld,
		"the Machine remediation admitted machine-h0 on h0 while the soft PowerCycleRemediation %s holds it (its request on h0): "+
			"the external section records no host for it (Others %v)", n0, m.Others)
}

// TestReview41_GoneSoftRemediationRemovesMachineRequestsAndReleases: a
// soft PowerCycleRemediation records no request with its admission (see
// TestReview41_SoftRemediationNotLockedAcrossControllers). Given up on
// while its host h0 is off (h0's BMC refuses the power-on; the checker
// deletes it, the operator removes the finalizer), its gone pass finds no
// recorded request and no host (HostOf reads the deleted object), so it
// takes the path of a pre-Requests record: removeOrphans removes every
// reboot request on the namespace's hosts whose owner is not among the
// external store's List (PowerCycleRemediations and Nodes, never
// Machines), that is the Machine remediation's live request on h1 too;
// and stillHeld, with no recorded request, holds nothing, so the
// admission goes at once with h0 off (the storm guard's count, h0's
// lock). Ground truth: a direct read of h1's BareMetalHost, h0's fake
// power and the shared record.
func TestReview41_GoneSoftRemediationRemovesMachineRequestsAndReleases(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	// The Machine remediation holds h1: admitted, its request on h1.
	key := reboot.AnnotationPrefix + remediation.RebootKey
	at := time.Now()
	theirs := remediation.RebootValue("machine-uid-h1", at)
	ma := &Admissions{Client: e.direct, Namespace: e.ns}
	adm, err := ma.GetAdmissions(e.ctx)
	require.NoError(t, err)
	adm.Machines = append(adm.Machines, "machine-h1")
	adm.Requests = map[string]remediation.Request{"machine-h1": {Value: theirs, At: at, Host: "h1"}}
	require.NoError(t, ma.PutAdmissions(e.ctx, adm))
	bmh := newBMHRef(e.ns, "h1")
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	if bmh.Annotations == nil {
		bmh.Annotations = map[string]string{}
	}
	bmh.Annotations[key] = theirs
	require.NoError(t, e.direct.Update(e.ctx, bmh))

	n0 := e.nodeOf["h0"]
	e.hang("h0")
	spec := workerSpec(time.Minute)
	spec.Mode = "soft"
	e.nhcCreate(n0, spec)
	shared := &Admissions{Client: e.direct, Namespace: e.ns, Section: SectionExternal}
	e.eventually("h0 off under its admitted soft remediation", 30*time.Second, func() bool {
		a, err := shared.GetAdmissions(e.ctx)
		return err == nil && a.Has(n0) && e.offs("h0") > 0 && !e.hw["h0"].HardwareOn()
	})
	require.NoError(t, e.checker.Delete(e.ctx, e.remediationOf(n0)))
	e.eventually("the finalizer removed by hand", 10*time.Second, func() bool {
		r := e.remediationOf(n0)
		if r == nil {
			return true
		}
		_ = e.direct.Patch(e.ctx, r, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		return false
	})
	time.Sleep(3 * time.Second) // its gone pass
	require.False(t, e.hw["h0"].HardwareOn(), "test setup: h0 on")
	require.NoError(t, e.direct.Get(e.ctx, client.ObjectKeyFromObject(bmh), bmh))
	assert.Equal(t, theirs, bmh.Annotations[key],
		"the gone PowerCycleRemediation's pass removed the Machine remediation's live reboot request from h1")
	a, err := shared.GetAdmissions(e.ctx)
	require.NoError(t, err)
	assert.True(t, a.Has(n0), "the gone soft remediation's admission released while h0 is off (no host recorded for it): %+v", a)
}
