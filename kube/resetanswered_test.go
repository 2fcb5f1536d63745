package kube

import (
	"encoding/json"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestAnsweredNormalOnlyWithNoRequestAndPinnedBMC: the reset path ends
// the normal path's pending reboot (and drops its pin) only when the host
// carries no request and its spec.bmc is still the pinned one: a BMC a
// reboot client put in (or a request still asking for the reboot) keeps
// the pin. The fencing evidence stays; the input is not mutated.
func TestAnsweredNormalOnlyWithNoRequestAndPinnedBMC(t *testing.T) {
	since := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st := reboot.Status{PendingRebootSince: since, LastPoweredOff: since.Add(time.Minute), Mode: power.ModeHard,
		Seen: []string{"x"}, LastRequestSeen: since, HoldBroken: since.Add(2 * time.Minute), Works: 3}
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	bmc := metal3.BMCDetails{Address: "redfish+https://10.0.0.1/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}
	host := func(bmc metal3.BMCDetails, ann map[string]string) *metal3.BareMetalHost {
		return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h1", UID: types.UID("u1"), Annotations: ann},
			Spec: metal3.BareMetalHostSpec{BMC: bmc}}
	}
	rec := &v1alpha1.RebootRecord{Spec: v1alpha1.RebootRecordSpec{HostUID: "u1", Status: string(raw),
		BMC: &v1alpha1.BMCPin{Address: bmc.Address, CredentialsName: bmc.CredentialsName, PendingSince: stamp(since)}}}
	before := rec.DeepCopy()

	got, ok := answeredNormal(host(bmc, nil), rec, true)
	require.True(t, ok, "no request, pinned BMC: the reboot is ended")
	require.False(t, got.Pending())
	require.Equal(t, st.LastPoweredOff, got.LastPoweredOff, "the fencing evidence stays")
	require.Equal(t, st.HoldBroken, got.HoldBroken)
	require.Equal(t, st.Works, got.Works)
	require.Nil(t, got.Seen)
	require.Equal(t, before, rec, "the record read is not mutated")

	moved := bmc
	moved.Address = "redfish+https://10.6.6.6/redfish/v1/Systems/1"
	_, ok = answeredNormal(host(moved, nil), rec, true)
	require.False(t, ok, "a BMC changed during the reboot keeps the pin")
	insecure := bmc
	insecure.DisableCertificateVerification = true
	_, ok = answeredNormal(host(insecure, nil), rec, true)
	require.False(t, ok, "TLS verification turned off during the reboot keeps the pin")
	_, ok = answeredNormal(host(bmc, map[string]string{reboot.AnnotationPrefix + "fencer": "{}"}), rec, true)
	require.False(t, ok, "a keyed request still asks for the reboot")
	_, ok = answeredNormal(host(bmc, map[string]string{reboot.Annotation: ""}), rec, true)
	require.False(t, ok, "a bare request still asks for it")

	other := rec.DeepCopy()
	other.Spec.BMC.PendingSince = stamp(since.Add(-time.Hour))
	_, ok = answeredNormal(host(bmc, nil), other, true)
	require.False(t, ok, "a pin of another reboot (the reset path's own) is not the normal path's")
	_, ok = answeredNormal(host(bmc, nil), rec, false)
	require.False(t, ok)
}
