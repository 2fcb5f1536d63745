package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestSharedAdmissionsOnAPIServer: the Machine remediation and the
// external remediation keep one admission record (a section each): each
// reads the other's as Others with its host, a write of one section from
// a version the other has written since fails (ErrConflict: concurrent
// writers of either controller), neither write changes the other section,
// the lock per host holds across sections (ErrHostHeld, both ways), and
// stores built afresh (a controller restarted) read the same record.
// Ground truth: reads with the uncached admin client.
func TestSharedAdmissionsOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	hostOf := map[string]string{"m1": "h1", "m2": "h2", "r1": "h1", "r2": "h3"}
	lookup := func(_ context.Context, n string) (string, error) {
		if h, ok := hostOf[n]; ok {
			return h, nil
		}
		return "", remediation.ErrNotFound
	}
	machines := func() *hostAdmissions {
		return &hostAdmissions{AdmissionStore: &Admissions{Client: c, Namespace: ns}, hostOf: lookup}
	}
	external := func() *hostAdmissions {
		return &hostAdmissions{AdmissionStore: &Admissions{Client: c, Namespace: ns, Section: SectionExternal}, hostOf: lookup}
	}
	at := time.Now().UTC().Truncate(time.Second)

	m, err := machines().GetAdmissions(ctx)
	require.NoError(t, err)
	e, err := external().GetAdmissions(ctx)
	require.NoError(t, err)
	m.Machines = []string{"m1"}
	m.Requests = map[string]remediation.Request{"m1": {Value: "v1", At: at, Host: "h1"}}
	require.NoError(t, machines().PutAdmissions(ctx, m))
	e.Machines = []string{"r2"}
	assert.ErrorIs(t, external().PutAdmissions(ctx, e), remediation.ErrConflict, "read before the other section was written")

	e, err = external().GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"m1": "h1"}, e.Others, "the Machine remediation's admission, with its host")
	assert.Empty(t, e.Machines)
	held := e
	held.Machines = []string{"r1"} // its host h1 is m1's
	assert.ErrorIs(t, external().PutAdmissions(ctx, held), ErrHostHeld, "a PowerCycleRemediation of the host the Machine remediation holds")
	e.Machines = []string{"r2"}
	e.Requests = map[string]remediation.Request{"r2": {Value: "v2", At: at, Host: "h3"}}
	require.NoError(t, external().PutAdmissions(ctx, e))

	m, err = machines().GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, m.Machines, "the external write kept the Machine section")
	assert.Equal(t, "h1", m.Requests["m1"].Host)
	assert.Equal(t, map[string]string{"r2": "h3"}, m.Others)
	taken := m
	taken.Machines = []string{"m1", "m3"}
	taken.Requests = map[string]remediation.Request{"m1": m.Requests["m1"], "m3": {Value: "v3", At: at, Host: "h3"}}
	assert.ErrorIs(t, machines().PutAdmissions(ctx, taken), ErrHostHeld, "a Machine of the host a PowerCycleRemediation holds")

	// Released by the Machine remediation: the external section stays.
	m.Machines, m.Requests = []string{}, nil
	require.NoError(t, machines().PutAdmissions(ctx, m))
	e, err = external().GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"r2"}, e.Machines)
	assert.Equal(t, "h3", e.Requests["r2"].Host)
	assert.Empty(t, e.Others)
}

// TestSharedAdmissionsKeepMembersPerSection: each controller's
// remediation.Members (a gone remediation's scope, Wrote and PrevHost)
// are kept in its own section of the shared record ("members",
// "external-members"): a write of one section, an admission or a release,
// never replaces or drops the other's, and neither reads the other's as
// its own. Ground truth: the ConfigMap's keys read with the uncached
// admin client.
func TestSharedAdmissionsKeepMembersPerSection(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	machines := &Admissions{Client: c, Namespace: ns}
	external := &Admissions{Client: c, Namespace: ns, Section: SectionExternal}
	at := time.Now().UTC().Truncate(time.Second)
	mem := remediation.Member{Cluster: "c1", HealthCheck: "mhc", ControlPlane: true, Wrote: true, PrevHost: "h0"}
	ext := remediation.Member{Wrote: true, PrevHost: "h9"}

	m, err := machines.GetAdmissions(ctx)
	require.NoError(t, err)
	m.Machines = []string{"m1"}
	m.Requests = map[string]remediation.Request{"m1": {Value: "v1", At: at, Host: "h1"}}
	m.Members = map[string]remediation.Member{"m1": mem}
	require.NoError(t, machines.PutAdmissions(ctx, m))

	e, err := external.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Empty(t, e.Members, "the Machine remediation's members are not the external section's")
	e.Machines = []string{"r1"}
	e.Requests = map[string]remediation.Request{"r1": {Value: "v2", At: at, Host: "h2"}}
	e.Members = map[string]remediation.Member{"r1": ext}
	require.NoError(t, external.PutAdmissions(ctx, e))

	m, err = machines.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]remediation.Member{"m1": mem}, m.Members, "the external write kept the Machine remediation's members")
	// Released by the Machine remediation: the external members stay.
	m.Machines, m.Requests, m.Members = []string{}, nil, nil
	require.NoError(t, machines.PutAdmissions(ctx, m))
	e, err = external.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]remediation.Member{"r1": ext}, e.Members, "the Machine remediation's release kept the external members")

	var cm corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rebootkit-remediation-admissions"}, &cm))
	assert.JSONEq(t, `{}`, cm.Data["members"])
	assert.JSONEq(t, `{"r1":{"wrote":true,"prevHost":"h9"}}`, cm.Data["external-members"])
}
