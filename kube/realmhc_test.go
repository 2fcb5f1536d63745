package kube

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// capiVersion is the Cluster API release whose core manager
// scripts/build-capi.sh builds: the one of the sigs.k8s.io/cluster-api/api
// this module pins.
const capiVersion = "v1.14.2"

// realCAPI returns the path of Cluster API's core manager built by
// scripts/build-capi.sh (REBOOTKIT_CAPI_BIN, or its cache), or skips the
// test loudly (fails it where CI builds the binary).
func realCAPI(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("REBOOTKIT_CAPI_BIN")
	if bin == "" {
		dir, err := os.UserCacheDir()
		if err == nil {
			bin = filepath.Join(dir, "rebootkit", "capi-"+capiVersion, "cluster-api-manager")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatalf("no Cluster API manager binary at %q although CI builds it (scripts/build-capi.sh)", bin)
		}
		t.Skip("REAL CLUSTER API TEST SKIPPED: build it with REBOOTKIT_CAPI_BIN=$(scripts/build-capi.sh)")
	}
	return bin
}

// infraGroup is the group of the infrastructure provider the tests play
// (Metal3Cluster and Metal3Machine, as CAPM3 names them).
const infraGroup = "infrastructure.cluster.x-k8s.io"

// infraCRD is a minimal CRD for an infrastructure kind (any fields, a
// status subresource) that declares Cluster API's v1beta2 contract, as a
// provider's CRD does with its label.
func infraCRD(kind string) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + infraGroup, Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta1"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: infraGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}}
}

var installCAPICRDs sync.Once

// startCAPI installs Cluster API's CRDs (but Machine's and
// MachineHealthCheck's, which the tests install from the typed API) and
// the two infrastructure kinds, and runs the real core manager on
// namespace ns, under its own role and the ones aggregated into it
// (capiUser), until the test ends: its webhook
// server on a free port with a throwaway certificate (no webhook
// configuration is installed: the API server never calls it), no
// metrics listener, the CRD migration skipped (the CRDs are installed at
// their storage version), the alpha and beta controllers that need more
// CRDs or a runtime extension off.
func startCAPI(t *testing.T, bin, ns string) {
	t.Helper()
	var err error
	installCAPICRDs.Do(func() {
		var paths []string
		matches, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), "crds", "*.yaml"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "cluster.x-k8s.io_machines.yaml") && !strings.HasSuffix(m, "cluster.x-k8s.io_machinehealthchecks.yaml") {
				paths = append(paths, m)
			}
		}
		if len(paths) == 0 {
			err = fmt.Errorf("no CRDs beside %s", bin)
			return
		}
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true,
			CRDs: []*apiextensionsv1.CustomResourceDefinition{infraCRD("Metal3Cluster"), infraCRD("Metal3Machine")}})
	})
	require.NoError(t, err, "Cluster API's CRDs")
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kcPath, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: envtest, cluster: {server: %q}}]
users: [{name: admin, user: {}}]
contexts: [{name: envtest, context: {cluster: envtest, user: admin}}]
current-context: envtest
`, versionProxy(t, capiUser(t, bin, ns)))), 0o600))
	certDir := t.TempDir()
	writeSelfSigned(t, certDir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--namespace="+ns, "--leader-elect=false",
		"--diagnostics-address=0", "--insecure-diagnostics", "--health-addr=127.0.0.1:0",
		fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+certDir,
		"--feature-gates=MachinePool=false,ClusterTopology=false,RuntimeSDK=false",
		"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields", "--v=3")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcPath)
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&out, &mu}, lockedWriter{&out, &mu}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() || testing.Verbose() && os.Getenv("REBOOTKIT_CAPI_LOG") == "1" {
			mu.Lock()
			log := out.String()
			mu.Unlock()
			if len(log) > 12000 {
				log = log[len(log)-12000:]
			}
			t.Logf("Cluster API manager's log (end):\n%s", log)
		}
	})
}

// envtestKubeVersion is the version of the kube-apiserver
// scripts/build-envtest.sh builds.
const envtestKubeVersion = "v1.37.1"

// capiUser returns a config for a new user bound to exactly what Cluster
// API's manager gets in a cluster: its generated ClusterRole
// (rbac/role.yaml beside the binary) and the roles aggregated into it by
// the cluster.x-k8s.io/aggregate-to-manager label (envtest runs no
// aggregation controller, so they are bound directly): our
// config/rbac/external_remediation_checker_role.yaml, and the
// infrastructure provider's rules on its kinds (as CAPM3 aggregates
// them).
func capiUser(t *testing.T, bin, ns string) *rest.Config {
	t.Helper()
	manager, _ := rolesOf(t, filepath.Join(filepath.Dir(bin), "rbac", "role.yaml"))
	require.NotEmpty(t, manager, "Cluster API's manager role")
	checker, _ := rolesOf(t, "config/rbac/external_remediation_checker_role.yaml")
	require.NotEmpty(t, checker)
	rules := append(append(manager, checker...), rbacv1.PolicyRule{APIGroups: []string{infraGroup},
		Resources: []string{"metal3clusters", "metal3machines"}, Verbs: []string{"get", "list", "watch", "patch", "update"}})
	return asUser(t, "capi-manager-"+ns, rules, "")
}

// versionProxy serves the envtest API server as user on a local
// plain-HTTP address (returned as a URL) until the test ends, passing
// every request and answer through unchanged but /version's, whose
// gitVersion, major and minor it sets to envtestKubeVersion's. The
// kube-apiserver built from the module proxy lacks the release's version
// stamps and reports v0.0.0-master, which Cluster API's manager refuses
// as its management cluster ("minimum required version is v1.20.0").
func versionProxy(t *testing.T, user *rest.Config) string {
	t.Helper()
	rt, err := rest.TransportFor(user)
	require.NoError(t, err)
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	p := &httputil.ReverseProxy{Transport: rt, FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.URL.Path != "/version" || resp.StatusCode != http.StatusOK {
				return nil
			}
			var v map[string]any
			raw, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			parts := strings.Split(strings.TrimPrefix(envtestKubeVersion, "v"), ".")
			v["gitVersion"], v["major"], v["minor"] = envtestKubeVersion, parts[0], parts[1]
			raw, err = json.Marshal(v)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			resp.ContentLength = int64(len(raw))
			resp.Header.Set("Content-Length", strconv.Itoa(len(raw)))
			return nil
		}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

func adminKubeconfigBytes(t *testing.T, name string) []byte {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cfg)
	require.NoError(t, err)
	kc, err := u.KubeConfig()
	require.NoError(t, err)
	return kc
}

// writeSelfSigned writes a throwaway serving certificate (tls.crt,
// tls.key) for 127.0.0.1 into dir.
func writeSelfSigned(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
}

// provisionedInfra creates an infrastructure object of kind (Metal3Cluster
// or Metal3Machine) reported provisioned, as the provider does once it
// has the server; a machine's carries its Node's providerID.
func provisionedInfra(t *testing.T, e *extEnv, kind, name, node string) {
	t.Helper()
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(infraGroup + "/v1beta1")
	o.SetKind(kind)
	o.SetNamespace(e.ns)
	o.SetName(name)
	if node != "" {
		require.NoError(t, unstructured.SetNestedField(o.Object, providerID(node), "spec", "providerID"))
	}
	require.NoError(t, e.direct.Create(e.ctx, o))
	require.NoError(t, unstructured.SetNestedField(o.Object, true, "status", "initialization", "provisioned"))
	require.NoError(t, e.direct.Status().Update(e.ctx, o))
}

// capiMachine creates a Machine of cluster c1 on the Metal3Machine
// <name>-m3m, with labels.
func capiMachine(t *testing.T, e *extEnv, name string, labels map[string]string) {
	t.Helper()
	labels[clusterv1.ClusterNameLabel] = "c1"
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infraGroup, Kind: "Metal3Machine", Name: name + "-m3m"}}}
	require.NoError(t, e.direct.Create(e.ctx, m))
}

// TestRealMachineHealthCheck (issue 41, against the real Cluster API core
// manager v1.14.2 built from the module proxy by scripts/build-capi.sh,
// run beside rebootkit's controllers; no driver): a Cluster c1 whose
// workload cluster is the envtest API server itself (its
// c1-kubeconfig Secret), a control-plane Machine and a worker Machine m0
// on BareMetalHost h0 (through its Metal3Machine, the infrastructure
// provider played by the test), and a MachineHealthCheck with
// spec.remediation.templateRef naming a PowerCycleRemediationTemplate.
// The Machine controller links m0 to its Node by providerID; the Node
// goes NotReady; the real MachineHealthCheck controller creates the
// PowerCycleRemediation from the template (named after the Machine, owned
// by it, cloned-from annotations); rebootkit fences the host (ground
// truth: the fake power off), deletes the Node only while the host is
// off (checked against the fake power at the deletion), powers it on;
// the test's kubelet registers the Node again and reports it Ready; the
// real MachineHealthCheck controller finds the Machine healthy and
// deletes the remediation; one power cycle in all, the host on, no
// reboot request left. It logs the time from NotReady to the remediation,
// to a fenced host, to a back-and-Ready Node and to the remediation's
// deletion.
func TestRealMachineHealthCheck(t *testing.T) {
	needAPIServer(t)
	bin := realCAPI(t)
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	ctx := e.ctx
	e.template("pc", v1alpha1.PowerCycleRemediationSpec{Timeout: &metav1.Duration{Duration: time.Minute}})
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: infraGroup + "/v1beta1", Kind: "Metal3Machine", Name: "m0-m3m", Namespace: e.ns}
	require.NoError(t, e.direct.Update(ctx, bmh))

	// The control plane's Node: Ready throughout (not under the check).
	cpNode := e.ns + "-cp0"
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cpNode}, Spec: corev1.NodeSpec{ProviderID: providerID(cpNode)}}
	require.NoError(t, e.direct.Create(ctx, cp))
	now := metav1.Now()
	cp.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}
	require.NoError(t, e.direct.Status().Update(ctx, cp))
	t.Cleanup(func() { _ = e.direct.Delete(context.Background(), cp) })

	startCAPI(t, bin, e.ns)
	provisionedInfra(t, e, "Metal3Cluster", "c1", "")
	require.NoError(t, e.direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "c1-kubeconfig",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}}, Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": adminKubeconfigBytes(t, "workload-"+e.ns)}}))
	require.NoError(t, e.direct.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "c1"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infraGroup, Kind: "Metal3Cluster", Name: "c1"}}}))
	provisionedInfra(t, e, "Metal3Machine", "cp0-m3m", cpNode)
	provisionedInfra(t, e, "Metal3Machine", "m0-m3m", e.nodeOf["h0"])
	capiMachine(t, e, "cp0", map[string]string{clusterv1.MachineControlPlaneLabel: ""})
	capiMachine(t, e, "m0", map[string]string{"pool": "workers"})
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "workers"},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "c1", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](1)}}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TemplateRef: clusterv1.MachineHealthCheckRemediationTemplateReference{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "PowerCycleRemediationTemplate", Name: "pc"}}}}
	require.NoError(t, e.direct.Create(ctx, mhc))

	// The real controllers link the worker Machine to its Node and see it
	// healthy before the Node hangs.
	// (With a templateRef, the controller patches a healthy Machine's
	// HealthCheckSucceeded only when it has a remediation to delete: its
	// own status is what says it saw the Machine healthy.)
	var m0 clusterv1.Machine
	var seen clusterv1.MachineHealthCheck
	deadline := time.Now().Add(120 * time.Second)
	for {
		require.NoError(t, e.direct.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "m0"}, &m0))
		require.NoError(t, e.direct.Get(ctx, clientKey(mhc), &seen))
		if m0.Status.NodeRef.Name == e.nodeOf["h0"] && ptr.Deref(seen.Status.ExpectedMachines, 0) == 1 && ptr.Deref(seen.Status.CurrentHealthy, 0) == 1 {
			break
		}
		if !time.Now().Before(deadline) {
			var c1 clusterv1.Cluster
			_ = e.direct.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "c1"}, &c1)
			t.Fatalf("the MachineHealthCheck never saw m0 healthy: m0's nodeRef %q; the check's status %+v; cluster c1's conditions %+v",
				m0.Status.NodeRef.Name, seen.Status, c1.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Zero(t, e.offs("h0"), "no power-off before the Node hung")

	t0 := e.hang("h0")
	var created, back, deleted time.Time
	var r *v1alpha1.PowerCycleRemediation
	e.eventually("the MachineHealthCheck created the remediation", 60*time.Second, func() bool {
		r = e.remediationOf("m0")
		return r != nil
	})
	created = time.Now()
	require.Len(t, r.OwnerReferences, 1)
	assert.Equal(t, "Machine", r.OwnerReferences[0].Kind)
	assert.Equal(t, "m0", r.OwnerReferences[0].Name)
	assert.Equal(t, "pc", r.Annotations[clusterv1.TemplateClonedFromNameAnnotation], "cloned from our template by Cluster API")
	assert.Equal(t, "c1", r.Labels[clusterv1.ClusterNameLabel])
	e.eventually("the real MachineHealthCheck deleted the remediation", 120*time.Second, func() bool {
		if back.IsZero() && e.offs("h0") > 0 {
			if _, ready := e.nodeReady("h0"); ready {
				back = time.Now()
			}
		}
		return e.remediationOf("m0") == nil
	})
	deleted = time.Now()
	fences, whileOn := e.fc.counts()
	assert.Positive(t, fences, "the Node deleted while the host was off")
	assert.Empty(t, whileOn, "the Node was deleted while its host ran (ground truth)")
	assert.Equal(t, 1, e.offs("h0"), "one power cycle (ground truth)")
	e.eventually("host on", 10*time.Second, func() bool { return e.hw["h0"].HardwareOn() })
	assert.False(t, e.held("h0"), "no reboot request left on the host")
	n, ready := e.nodeReady("h0")
	require.NotNil(t, n)
	assert.True(t, ready)
	off := e.firstOffAfter("h0", t0)
	require.False(t, off.IsZero())
	// Cluster API's MachineHealthCheck controller reconciles a check at
	// most once per 15 s (its rate limit, on by default): the remediation
	// comes at its first pass after the 1 s timeout, its deletion at the
	// first pass after the Node is Ready.
	t.Logf("real MachineHealthCheck (Cluster API %s, Node Ready False for 1s is unhealthy, one pass per 15s): NotReady -> remediation created %s; -> host fenced (off, ground truth) %s (%s after the remediation was seen); -> Node back and Ready %s; -> remediation deleted by the checker %s",
		capiVersion, created.Sub(t0).Round(10*time.Millisecond), off.Sub(t0).Round(10*time.Millisecond), off.Sub(created).Round(10*time.Millisecond),
		back.Sub(t0).Round(10*time.Millisecond), deleted.Sub(t0).Round(10*time.Millisecond))
}
