package kube

import (
	"fmt"

	"github.com/go-logr/logr"
	"os"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// cfg reaches the API server every envtest test shares (nil when the
// envtest binaries are not there: those tests skip, loudly).
var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	_ = clientgoscheme.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Fprintln(os.Stderr, "!!! KUBEBUILDER_ASSETS unset: the tests against a real API server will SKIP (KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)) !!!")
		os.Exit(m.Run())
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"testdata/crds"}, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	var err error
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
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
