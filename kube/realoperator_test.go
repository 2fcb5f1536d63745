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
	"github.com/rebootkit/rebootkit/remediation"
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
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
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

// TestRealOperatorEvidence (issue 39, point 4, against the real
// baremetal-operator v0.13.2 in test mode): the remediation's view of a
// host the operator manages (OperatorHosts) takes the operator's
// status.poweredOn as a reading. A host the operator already shows off
// (spec.online false, before the request: the operator writes nothing
// new) is fenced StaleReads after the request; a host the operator powers
// off for the request (its status written within the request's second)
// is fenced StaleReads after the request too, and never before. On the
// code before point 4 the first was never fenced and the second was fenced
// at the operator's write.
func TestRealOperatorEvidence(t *testing.T) {
	needAPIServer(t)
	bin := realOperator(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, direct.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: metal3.BareMetalHostSpec{Online: true, ExternallyProvisioned: true,
			BMC: metal3.BMCDetails{Address: "redfish+http://127.0.0.1:9/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}))
	startOperator(t, bin, ns)
	var bmh metal3.BareMetalHost
	waitHost := func(what string, ok func(*metal3.BareMetalHost) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
			if ok(&bmh) {
				return
			}
			require.True(t, time.Now().Before(deadline), "the operator never %s: %+v", what, bmh.Status)
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitHost("took the host to externally provisioned and on", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateExternallyProvisioned && h.Status.PoweredOn
	})
	const stale = 2 * time.Second
	s := &OperatorHosts{Client: direct, Namespace: ns, HostOf: func(context.Context, string) (string, error) { return "h1", nil }, StaleReads: stale}
	// fencedAt asks for a fence at req and returns when the view first
	// said Fenced, checking that it never did before StaleReads after
	// the request's second.
	fencedAt := func(req remediation.Request) time.Time {
		t.Helper()
		require.NoError(t, s.AddRebootAnnotation(ctx, "m1", req))
		deadline := time.Now().Add(30 * time.Second)
		for {
			before := time.Now()
			h, err := s.Get(ctx, "m1", req)
			require.NoError(t, err)
			if h.Fenced {
				require.False(t, before.Before(req.At.Truncate(time.Second).Add(stale)),
					"fenced %v after the request, before StaleReads (%v): the operator's reading may predate it", before.Sub(req.At), stale)
				return before
			}
			require.True(t, time.Now().Before(deadline), "never fenced: %+v", h)
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Already shown off: the operator powers it off for spec.online false
	// and then writes nothing new for the request.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.Online = false }))
	waitHost("showed the host off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })
	time.Sleep(time.Second)
	req := remediation.Request{Value: `{"mode":"hard"}`, At: time.Now()}
	at := fencedAt(req)
	t.Logf("shown off before the request: fenced %v after it", at.Sub(req.At).Round(time.Millisecond))
	require.NoError(t, s.RemoveRebootAnnotation(ctx, "m1"))

	// Powered off by the operator for the request.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.Online = true }))
	waitHost("powered the host on again", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
	req = remediation.Request{Value: `{"mode":"hard"}`, At: time.Now()}
	at = fencedAt(req)
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	require.False(t, bmh.Status.PoweredOn, "the operator showed the host off for the request")
	require.NotNil(t, bmh.Status.LastUpdated)
	t.Logf("powered off by the operator for the request (status written at %v, the request at %v): fenced %v after it",
		bmh.Status.LastUpdated.UTC().Format(time.RFC3339), req.At.UTC().Format(time.RFC3339Nano), at.Sub(req.At).Round(time.Millisecond))
	require.NoError(t, s.RemoveRebootAnnotation(ctx, "m1"))
}
