package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestClientCannotForgeFencing (issue 28, B8): a client allowed to ask for
// reboots (update on BareMetalHosts) can neither make Fenced true for a
// running host nor redirect another host's BMC credentials to its own
// endpoint. On the old code the evidence was an annotation it could write,
// and any Secret named in spec.bmc was sent to any address.
func TestClientCannotForgeFencing(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	h1 := newBMH(t, admin, ns, "h1")
	newBMH(t, admin, ns, "h2")
	require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h2-bmc", Labels: map[string]string{BMCHostLabel: "h2"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("h2-secret-pw")}}))
	// The role shipped for reboot clients (config/rbac/reboot_client_role.yaml).
	rebootClientRules, _ := rolesOf(t, "config/rbac/reboot_client_role.yaml")
	require.NotEmpty(t, rebootClientRules)
	userCfg := asUser(t, "reboot-client-"+ns, rebootClientRules, ns)
	uc, err := client.New(userCfg, client.Options{Scheme: scheme})
	require.NoError(t, err)

	// The client asks for a fencing reboot, taking T first.
	cl := &reboot.Client{Hosts: &RebootHosts{Client: uc, Namespace: ns}, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h1", power.ModeHard)
	require.NoError(t, err)
	forged := reboot.Status{LastPoweredOff: time.Now().Add(time.Second).Truncate(time.Second), PendingRebootSince: tk.At.Truncate(time.Second),
		LastRequestSeen: tk.At.Truncate(time.Second)}
	raw, _ := json.Marshal(forged)
	time.Sleep(1100 * time.Millisecond)

	// 1. Writing the record is forbidden.
	err = uc.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(h1.UID), Status: string(raw)}})
	assert.True(t, apierrors.IsForbidden(err), "creating a reboot record: %v", err)
	// 2. The old place of the evidence, an annotation, it can write; it is
	// not evidence.
	require.NoError(t, uc.Get(ctx, client.ObjectKeyFromObject(h1), h1))
	h1.Annotations[LegacyStatusAnnotation] = string(raw)
	require.NoError(t, uc.Update(ctx, h1))
	fenced, err := cl.Fenced(ctx, tk)
	require.NoError(t, err)
	assert.False(t, fenced, "a running host is not fenced by a forged annotation")

	// 3. Redirecting credentials: spec.bmc at the client's endpoint with
	// h2's Secret. The controller's Powers sends nothing there.
	var got atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1) // any request: a session login or basic auth would carry h2's password
		w.WriteHeader(http.StatusNotFound)
	}))
	defer trap.Close()
	require.NoError(t, uc.Get(ctx, client.ObjectKeyFromObject(h1), h1))
	h1.Spec.BMC.Address = "redfish+http://" + strings.TrimPrefix(trap.URL, "http://") + "/redfish/v1/Systems/1"
	h1.Spec.BMC.CredentialsName = "h2-bmc"
	require.NoError(t, uc.Update(ctx, h1))
	p := &Powers{WithoutAdmissionPolicy: true, Client: admin, Secrets: admin, Namespace: ns, Timeout: 5 * time.Second}
	_, err = p.Controller("h1")
	assert.ErrorIs(t, err, ErrSecretNotBound)
	assert.NotContains(t, err.Error(), "h2-secret-pw")
	assert.Zero(t, got.Load(), "no request reached the client's endpoint")
}

// TestCorruptRecordRepaired (issue 28, B8): a reboot record (or the old
// status annotation) that does not parse is reported and repaired: the
// host's request is served, not wedged. On the old code every pass of such
// a host failed, so the request could be neither served nor released.
func TestCorruptRecordRepaired(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "h1")
	h.Annotations = map[string]string{LegacyStatusAnnotation: "{not json", reboot.Annotation: `{"mode":"hard"}`}
	require.NoError(t, c.Update(ctx, h))
	require.NoError(t, c.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(h.UID), Status: "{not json either"}}))
	var reported atomic.Int32
	hosts := &RebootHosts{Client: c, Namespace: ns, Corrupt: func(string, error) { reported.Add(1) }}
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	r := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	before := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := r.Reconcile(ctx, "h1")
		if err != nil {
			require.ErrorIs(t, err, reboot.ErrConflict, "a pass fails only on a conflict")
		}
		got, gerr := hosts.Get(ctx, "h1")
		require.NoError(t, gerr)
		if _, pending := got.Annotations[reboot.Annotation]; !pending && got.Status.LastPoweredOn.After(before.Add(-time.Second)) && hw.HardwareOn() {
			break
		}
		require.True(t, time.Now().Before(deadline), "request not served: %+v", got)
		wait := res.RequeueAfter
		if wait <= 0 || wait > 200*time.Millisecond {
			wait = 50 * time.Millisecond
		}
		time.Sleep(wait)
	}
	assert.Positive(t, reported.Load(), "the corrupt record was reported")
	var rec v1alpha1.RebootRecord
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &rec))
	var st reboot.Status
	assert.NoError(t, json.Unmarshal([]byte(rec.Spec.Status), &st), "the record was repaired")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), h))
	assert.NotContains(t, h.Annotations, LegacyStatusAnnotation, "the old annotation is removed")
}
