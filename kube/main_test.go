package kube

import (
	"context"
	"fmt"

	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// cfg reaches the API server every envtest test shares (nil when the
// envtest binaries are not there: those tests skip, loudly).
var (
	cfg     *rest.Config
	testEnv *envtest.Environment
	scheme  = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	_ = clientgoscheme.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Fprintln(os.Stderr, "!!! KUBEBUILDER_ASSETS unset: the tests against a real API server will SKIP (KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)) !!!")
		os.Exit(m.Run())
	}
	crds, err := futureCRDs("testdata/crds", "config/crd/bases")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crds:", err)
		os.Exit(1)
	}
	env := &envtest.Environment{CRDs: crds, BinaryAssetsDirectory: assets}
	testEnv = env
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// FutureField is a field the CRDs the tests install have in spec and in
// status, and the pinned Go APIs lack: a newer baremetal-operator's or
// Cluster API's field. Every store write must keep it.
const FutureField = "futureField"

// futureCRDs reads the CRDs of dirs and adds FutureField (a string) to the
// spec and status of every version.
func futureCRDs(dirs ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, dir := range dirs {
		fs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(fs) == 0 {
			return nil, fmt.Errorf("no CRDs in %s: %v", dir, err)
		}
		files = append(files, fs...)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			for _, part := range []string{"spec", "status"} {
				p, ok := v.Schema.OpenAPIV3Schema.Properties[part]
				if !ok {
					continue
				}
				p.Properties[FutureField] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				v.Schema.OpenAPIV3Schema.Properties[part] = p
			}
		}
		out = append(out, crd)
	}
	return out, nil
}

// needAPIServer skips without the envtest binaries, or fails where CI
// built them (REBOOTKIT_REQUIRE_INTEROP=1).
func needAPIServer(t *testing.T) {
	t.Helper()
	if cfg != nil {
		return
	}
	if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
		t.Fatal("no API server although CI builds the envtest binaries")
	}
	t.Skip("API SERVER TEST SKIPPED: set KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)")
}

// asUser returns a config for a new user of the test API server bound to
// a ClusterRole with rules (in namespace ns, or cluster-wide if ns is "").
func asUser(t *testing.T, name string, rules []rbacv1.PolicyRule, ns string) *rest.Config {
	t.Helper()
	bindRole(t, name, rules, ns)
	u, err := testEnv.AddUser(envtest.User{Name: name}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}

// bindRole binds user name to a new ClusterRole with rules, in namespace
// ns (a RoleBinding) or cluster-wide if ns is "".
func bindRole(t *testing.T, name string, rules []rbacv1.PolicyRule, ns string) {
	t.Helper()
	ctx := context.Background()
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}, Rules: rules}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
	if ns == "" {
		err = admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}, Subjects: subject, RoleRef: ref})
	} else {
		err = admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"}, Subjects: subject, RoleRef: ref})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rolesOf reads the ClusterRole and Role rules of a YAML file of config/.
func rolesOf(t *testing.T, path string) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var r rbacv1.ClusterRole // a Role has the same fields
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch r.Kind {
		case "ClusterRole":
			cluster = append(cluster, r.Rules...)
		case "Role":
			namespaced = append(namespaced, r.Rules...)
		}
	}
	return cluster, namespaced
}

// asController returns a config for a new user bound to exactly the
// controller's generated role (config/rbac/role.yaml): its Role in
// namespace ns, its ClusterRole cluster-wide.
func asController(t *testing.T, ns string) *rest.Config {
	t.Helper()
	cluster, namespaced := rolesOf(t, "config/rbac/role.yaml")
	if len(namespaced) == 0 {
		t.Fatal("config/rbac/role.yaml has no Role")
	}
	name := "rebootkit-controller-" + ns
	bindRole(t, name, cluster, "")
	return asUser(t, name, namespaced, ns)
}

// adminClient is a client with the test API server's admin credentials
// that reads directly, not through a cache.
func adminClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// namespacedManager is a manager that runs as the controller (under the
// generated RBAC, see asController) with its cache on namespace ns and no
// metrics listener.
func namespacedManager(t *testing.T, ns string) manager.Manager {
	t.Helper()
	return managerAs(t, asController(t, ns), ns)
}

// managerAs is namespacedManager for a controller identity already made
// (a restarted controller keeps its user).
func managerAs(t *testing.T, rc *rest.Config, ns string) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(rc, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: UncachedObjects()}}})
	require.NoError(t, err)
	return mgr
}
