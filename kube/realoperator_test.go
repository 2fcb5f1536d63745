package kube

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// realOperator returns the path of the baremetal-operator built by
// scripts/build-bmo.sh (REBOOTKIT_BMO_BIN, or its cache), or skips the
// test loudly (fails it where CI builds the binary).
func realOperator(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("REBOOTKIT_BMO_BIN")
	if bin == "" {
		dir, err := os.UserCacheDir()
		if err == nil {
			bin = filepath.Join(dir, "rebootkit", "bmo-v0.13.2", "baremetal-operator")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatalf("no baremetal-operator binary at %q although CI builds it (scripts/build-bmo.sh)", bin)
		}
		t.Skip("REAL BAREMETAL-OPERATOR TEST SKIPPED: build it with REBOOTKIT_BMO_BIN=$(scripts/build-bmo.sh)")
	}
	return bin
}

var installBMOCRDs sync.Once

// startOperator installs the operator's CRDs (but the BareMetalHost's,
// which the tests generate) and runs the real baremetal-operator in test
// mode (the fixture provisioner: no Ironic, no BMC call) on namespace ns,
// as a cluster admin, until the test ends.
func startOperator(t *testing.T, bin, ns string) {
	t.Helper()
	var err error
	installBMOCRDs.Do(func() {
		var paths []string
		matches, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), "crds", "*.yaml"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "metal3.io_baremetalhosts.yaml") {
				paths = append(paths, m)
			}
		}
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	})
	require.NoError(t, err, "the operator's CRDs")
	u, err := testEnv.AddUser(envtest.User{Name: "bmo-" + ns, Groups: []string{"system:masters"}}, cfg)
	require.NoError(t, err)
	kc, err := u.KubeConfig()
	require.NoError(t, err)
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kcPath, kc, 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-test-mode", "-namespace", ns, "-metrics-addr", "0",
		"-health-addr", "127.0.0.1:0", "-webhook-port", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcPath, "POD_NAMESPACE="+ns)
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&out, &mu}, lockedWriter{&out, &mu}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			log := out.String()
			mu.Unlock()
			if len(log) > 8000 {
				log = log[len(log)-8000:]
			}
			t.Logf("baremetal-operator's log (end):\n%s", log)
		}
	})
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestRealOperatorDetach (issue 39, point 1, against the real
// baremetal-operator v0.13.2 in test mode): a host the operator manages
// is created with the detached annotation and a reboot request, before
// the operator registered and inspected it (the operator ignores the
// annotation until the host is in a detachable state); rebootkit makes no
// call to its BMC until the operator itself reports
// status.operationalStatus detached (checked at every poll: the BMC
// emulator's calls are counted before the host is read, uncached), then
// reboots it for a new request (one power cycle, ground truth). The
// operator never reaches the emulator (test mode: its fixture
// provisioner). On the code before point 1 (the annotation alone) the
// host was powered off at once, while the operator was registering it.
func TestRealOperatorDetach(t *testing.T) {
	needAPIServer(t)
	bin := realOperator(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"))
	defer srv.Close()
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	// The detached annotation and a reboot request come with the host,
	// before the operator has registered and inspected it: it ignores the
	// annotation until the host is in a detachable state.
	require.NoError(t, direct.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1",
		Annotations: map[string]string{metal3.DetachedAnnotation: "", reboot.Annotation: `{"mode":"hard"}`}},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: redfishAt(srv), CredentialsName: "h1-bmc"}}}))

	mgr := namespacedManager(t, ns)
	powers := &Powers{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	defer powers.Close()
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: events.NewFakeRecorder(1000)}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	startOperator(t, bin, ns)
	var bmh metal3.BareMetalHost
	states := map[metal3.ProvisioningState]bool{}
	powerCalls := func() int {
		n := 0
		for _, c := range hw.Calls() {
			if c.Op != fake.OpState {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := powerCalls() // before the read: a call now needs the detach written before
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
		states[bmh.Status.Provisioning.State] = true
		if bmh.Status.OperationalStatus == metal3.OperationalStatusDetached {
			break
		}
		require.Zero(t, n, "rebootkit powered the host before the operator reported it detached (state %q, operationalStatus %q): %v",
			bmh.Status.Provisioning.State, bmh.Status.OperationalStatus, hw.Calls())
		require.True(t, time.Now().Before(deadline), "the operator never detached the host: state %q", bmh.Status.Provisioning.State)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the operator's states seen before it detached the host: %v", states)
	// The operator, which owned the host until then, may have served the
	// request itself (its fixture's power). Now it is rebootkit's.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, `{"mode":"hard"}`)
	}))
	// The power-on is sent in the pass that removes the request; it
	// completes after the emulated hardware's lag.
	assert.Eventually(t, func() bool { return hw.Cycles() == 1 && hw.HardwareOn() }, 10*time.Second, 20*time.Millisecond,
		"ground truth: one power cycle: %v", hw.Truth())
}
