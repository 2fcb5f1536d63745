package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestExternalAdmissionsMovedToSharedRecord: the admissions an earlier
// version kept in ExternalAdmissionsName (with their requests and
// members) are moved into the shared
// record's external section (next to the Machine remediation's, which
// stays), and removed from the old ConfigMap, whose node backups stay: an
// upgrade keeps counting and locking the hosts they hold. Ground truth:
// uncached reads of both ConfigMaps.
func TestExternalAdmissionsMovedToSharedRecord(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	at := time.Now().UTC().Truncate(time.Second)
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ExternalAdmissionsName},
		Data: map[string]string{"machines": `["r1"]`, "requests": `{"r1":{"value":"v1","at":"` + at.Format(time.RFC3339) + `","host":"h1"}}`,
			"members":      `{"r1":{"cluster":"c1","wrote":true,"prevHost":"h0"}}`,
			nodeBackupsKey: `{}`}}))
	m := &Admissions{Client: c, Namespace: ns}
	a, err := m.GetAdmissions(ctx)
	require.NoError(t, err)
	a.Machines = []string{"m1"}
	require.NoError(t, m.PutAdmissions(ctx, a))

	ctl := &ExternalRemediationController{Client: c, Namespace: ns}
	require.NoError(t, ctl.migrateAdmissions(ctx))
	require.NoError(t, ctl.migrateAdmissions(ctx), "nothing left to move")

	ext, err := (&Admissions{Client: c, Namespace: ns, Section: SectionExternal}).GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"r1"}, ext.Machines)
	assert.Equal(t, remediation.Request{Value: "v1", At: at, Host: "h1"}, ext.Requests["r1"])
	assert.Equal(t, map[string]remediation.Member{"r1": {Cluster: "c1", Wrote: true, PrevHost: "h0"}}, ext.Members,
		"its member moved too: a gone remediation's release removes a request on its PrevHost")
	assert.Equal(t, map[string]string{"m1": ""}, ext.Others, "the Machine remediation's section stays")
	a, err = m.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, a.Machines)
	assert.Equal(t, map[string]string{"r1": "h1"}, a.Others)

	var cm corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ExternalAdmissionsName}, &cm))
	old, err := (&Admissions{Client: c, Namespace: ns, Name: ExternalAdmissionsName}).GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Empty(t, old.Machines, "moved: removed from the old ConfigMap")
	assert.Empty(t, old.Requests)
	assert.Empty(t, old.Members)
	assert.Equal(t, `{}`, cm.Data[nodeBackupsKey], "the node backups stay")
}
