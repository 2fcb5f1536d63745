package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestControllerBinary runs the real binary against a real API server
// (envtest) and an emulated Redfish BMC over HTTPS: a reboot annotation on
// a BareMetalHost power-cycles the emulated hardware once, and the
// controller records it.
func TestControllerBinary(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("KUBEBUILDER_ASSETS unset although CI builds the envtest binaries")
		}
		t.Skip("API SERVER TEST SKIPPED: set KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)")
	}
	bin, kubeconfig, c := startEnv(t, assets)
	dir := t.TempDir()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rkc-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
	srv := redfishtest.NewBMC(time.Now, hw, "admin", "bmc-Secret-1").StartTLS()
	defer srv.Close()
	ca := filepath.Join(dir, "bmc-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "h1-bmc", Labels: map[string]string{kube.BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("bmc-Secret-1")}}))
	must(c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "h1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://" + strings.TrimPrefix(srv.URL, "https://") + "/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}))

	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", ns.Name, "--baremetal-operator=false", "--controllers", "reboot,remediation", "--bmc-ca-file", ca, "--stale-reads", "500ms", "--soft-timeout", "2s")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	must(cmd.Start())
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("controller output:\n%s", logs.String())
		}
	}()

	before := time.Now()
	var bmh metal3.BareMetalHost
	must(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "h1"}, &bmh))
	bmh.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	must(c.Update(ctx, &bmh))
	hosts := &kube.RebootHosts{Client: c, Namespace: ns.Name}
	deadline := time.Now().Add(60 * time.Second)
	for {
		h, err := hosts.Get(ctx, "h1")
		_, pending := h.Annotations[reboot.Annotation]
		if err == nil && !pending && h.Status.LastPoweredOn.After(before) && hw.HardwareOn() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reboot: %+v %v, truth %v", h, err, hw.Truth())
		}
		time.Sleep(100 * time.Millisecond)
	}
	offs := 0
	for _, tc := range hw.Truth() {
		if !tc.On {
			offs++
		}
	}
	if offs != 1 {
		t.Fatalf("%d power-offs, want 1: %v", offs, hw.Truth())
	}
	t.Log("rebooted through the controller binary")
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// startEnv builds the binary (once per test process), starts a real API
// server with the CRDs for this test (stopped at its end), and returns the
// binary, a kubeconfig file and an admin client.
func startEnv(t *testing.T, assets string) (bin, kubeconfig string, c client.Client) {
	t.Helper()
	return startEnvWith(t, assets, "../../testdata/crds", "../../config/crd/bases")
}

// startEnvWith is startEnv with the CRDs of dirs (files or directories).
func startEnvWith(t *testing.T, assets string, crds ...string) (bin, kubeconfig string, c client.Client) {
	t.Helper()
	log.SetLogger(logr.Discard())
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rebootkit-controller-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "rebootkit-controller")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	c, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	installAdmission(t, c)
	return builtBin, kubeconfig, c
}

// installAdmission creates the reboot-client admission policy and binding
// of config/admission as the shipped manifests do (config/default applies
// them): without them the controller acts on no host unless run with
// --without-admission-policy.
func installAdmission(t *testing.T, c client.Client) {
	t.Helper()
	raw, err := os.ReadFile("../../config/admission/reboot_client_policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), &u); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("config/admission: %d objects, want a policy and its binding", n)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
