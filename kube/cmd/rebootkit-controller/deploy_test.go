package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// freePort returns a local address no one listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestBinaryStartsWithoutCAPI (issue 39, point 9): the binary as the
// Deployment runs it (--controllers=reboot,remediation) on an API server
// without the Cluster API CRDs starts the reboot controller, says that the
// remediation waits and for what, answers its liveness and readiness
// probes, and serves a reboot. On the old code it exited at once (no
// Machine kind) and had no probe endpoint.
func TestBinaryStartsWithoutCAPI(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("KUBEBUILDER_ASSETS unset although CI builds the envtest binaries")
		}
		t.Skip("API SERVER TEST SKIPPED: set KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)")
	}
	bin, kubeconfig, c := startEnvWith(t, assets, "../../testdata/crds/metal3.io_baremetalhosts.yaml", "../../config/crd/bases")
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rkc-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
	srv := redfishtest.NewBMC(time.Now, hw, "admin", "bmc-Secret-1").StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "bmc-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "h1-bmc", Labels: map[string]string{kube.BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("bmc-Secret-1")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "h1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://" + strings.TrimPrefix(srv.URL, "https://") + "/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}); err != nil {
		t.Fatal(err)
	}
	probes := freePort(t)
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", ns.Name, "--baremetal-operator=false", "--controllers=reboot,remediation",
		"--leader-elect=false", "--health-probe-bind-address", probes, "--bmc-ca-file", ca, "--stale-reads", "500ms", "--soft-timeout", "2s")
	var logs syncBuilder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("controller output:\n%s", logs.String())
		}
	}()
	get := func(path string) error {
		cl := &http.Client{Timeout: 2 * time.Second}
		resp, err := cl.Get("http://" + probes + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for get("/healthz") != nil || get("/readyz") != nil {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the binary exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("probes never answered: %v / %v", get("/healthz"), get("/readyz"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "remediation controller waits for the Cluster API CRDs") {
		t.Errorf("the binary does not say what waits:\n%s", logs.String())
	}
	// The reboot controller runs.
	before := time.Now()
	var bmh metal3.BareMetalHost
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "h1"}, &bmh); err != nil {
		t.Fatal(err)
	}
	bmh.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	if err := c.Update(ctx, &bmh); err != nil {
		t.Fatal(err)
	}
	hosts := &kube.RebootHosts{Client: c, Namespace: ns.Name}
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
}

// TestDeploymentSpreadsAndProbes (issue 39, point 9): the shipped
// Deployment never puts both replicas on one host (required pod
// anti-affinity on the hostname), has liveness and readiness probes on
// the binary's probe endpoint, and a PodDisruptionBudget keeps one
// replica; the default kustomization overrides the image. On the old code
// none of these were there.
func TestDeploymentSpreadsAndProbes(t *testing.T) {
	raw, err := os.ReadFile("../../config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	var pdb *policyv1.PodDisruptionBudget
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Deployment":
			dep = &appsv1.Deployment{}
			err = yaml.UnmarshalStrict([]byte(doc), dep)
		case "PodDisruptionBudget":
			pdb = &policyv1.PodDisruptionBudget{}
			err = yaml.UnmarshalStrict([]byte(doc), pdb)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if dep == nil || pdb == nil {
		t.Fatalf("manager.yaml: Deployment %v, PodDisruptionBudget %v", dep != nil, pdb != nil)
	}
	pod := dep.Spec.Template
	aa := pod.Spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
		t.Error("no required pod anti-affinity on the hostname")
	} else if sel := aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector; sel == nil ||
		sel.MatchLabels["app.kubernetes.io/name"] != pod.Labels["app.kubernetes.io/name"] {
		t.Error("the anti-affinity does not select the replicas")
	}
	ctr := pod.Spec.Containers[0]
	if ctr.LivenessProbe == nil || ctr.LivenessProbe.HTTPGet == nil || ctr.LivenessProbe.HTTPGet.Path != "/healthz" ||
		ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("no liveness and readiness probes")
	}
	if !strings.Contains(strings.Join(ctr.Args, " "), "--health-probe-bind-address=:8081") {
		t.Error("the probes' port is not the binary's")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
		pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != pod.Labels["app.kubernetes.io/name"] {
		t.Error("the PodDisruptionBudget does not keep one replica")
	}
	kz, err := os.ReadFile("../../config/default/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name string `json:"name"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(kz, &k); err != nil {
		t.Fatal(err)
	}
	if name, _, _ := strings.Cut(ctr.Image, ":"); len(k.Images) != 1 || k.Images[0].Name != name {
		t.Errorf("config/default does not override the image %q: %+v", ctr.Image, k.Images)
	}
}

// syncBuilder is a strings.Builder safe for the process's two pipes.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
