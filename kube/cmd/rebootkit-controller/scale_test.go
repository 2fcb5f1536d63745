package main

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestThousandHosts (issue 28, A1) runs the controller binary on 1,000
// BareMetalHosts (REBOOTKIT_SCALE_HOSTS overrides), each behind its own
// emulated Redfish BMC, except one BMC that accepts connections and never
// answers and one that is unreachable. A fencing request on a healthy host
// must power it off within 2 s of the request: once during the startup
// storm (every host's first pass) and once after it. It logs the startup
// time (until every healthy BMC was reached) and the controller's memory.
// On the old code (one worker, no deadline on BMC calls) the hung BMC held
// the only worker and the fencing request was never served.
func TestThousandHosts(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("KUBEBUILDER_ASSETS unset although CI builds the envtest binaries")
		}
		t.Skip("API SERVER TEST SKIPPED: set KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)")
	}
	n := 1000
	if v := os.Getenv("REBOOTKIT_SCALE_HOSTS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	require := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bin, kubeconfig, c := startEnv(t, assets)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rks-"}}
	require(c.Create(ctx, ns))

	// The BMCs: 0 hangs, 1 is unreachable, the others are emulated.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	require(err)
	var held sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			held.Lock()
			conns = append(conns, conn) // accepted, never answered
			held.Unlock()
		}
	}()
	defer func() {
		hung.Close()
		held.Lock()
		for _, c := range conns {
			c.Close()
		}
		held.Unlock()
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require(err)
	goneAddr := gone.Addr().String()
	gone.Close()
	hws := make([]*fake.Power, n)
	bmcs := make([]*redfishtest.BMC, n)
	addrs := make([]string, n)
	addrs[0], addrs[1] = hung.Addr().String(), goneAddr
	for i := 2; i < n; i++ {
		hws[i] = fake.NewPower(time.Now, fake.PowerConfig{})
		bmcs[i] = redfishtest.NewBMC(time.Now, hws[i], "admin", "pw")
		srv := httptest.NewServer(bmcs[i])
		defer srv.Close()
		addrs[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	name := func(i int) string { return fmt.Sprintf("h-%04d", i) }
	created := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name(i) + "-bmc",
					Labels: map[string]string{kube.BMCHostLabel: name(i)}},
					Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw")}}); err != nil {
					errs <- err
					return
				}
				if err := c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name(i)},
					Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{
						Address: "redfish+http://" + addrs[i] + "/redfish/v1/Systems/1", CredentialsName: name(i) + "-bmc"}}}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require(err)
	}
	t.Logf("%d hosts and secrets created in %v", n, time.Since(created).Round(time.Millisecond))

	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", ns.Name, "--baremetal-operator=false", "--stale-reads", "500ms",
		"--concurrent-reconciles", "32", "--bmc-call-timeout", "5s", "--bmc-connect-timeout", "5s")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require(cmd.Start())
	started := time.Now()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out := logs.String()
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("controller output (tail):\n%s", out)
		}
	}()

	fence := func(i int) time.Duration {
		t.Helper()
		var bmh metal3.BareMetalHost
		require(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name(i)}, &bmh))
		bmh.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
		asked := time.Now()
		require(c.Update(ctx, &bmh))
		for hws[i].HardwareOn() {
			if time.Since(asked) > 60*time.Second {
				t.Fatalf("host %s not powered off 60 s after the fencing request", name(i))
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(asked)
	}
	reached := func() int {
		k := 0
		for i := 2; i < n; i++ {
			if bmcs[i].Logins() > 0 {
				k++
			}
		}
		return k
	}
	// During the startup storm: once the controller has begun (some BMC
	// reached), well before it has reached them all.
	for reached() == 0 {
		if time.Since(started) > 60*time.Second {
			t.Fatal("the controller reached no BMC in 60 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := reached()
	stormLatency := fence(n / 2)
	t.Logf("fencing during the startup storm (%d of %d BMCs reached when asked): powered off %v after the request", before, n-2, stormLatency.Round(time.Millisecond))
	for reached() < n-2 {
		if time.Since(started) > 5*time.Minute {
			t.Fatalf("only %d of %d healthy BMCs reached in 5 min", reached(), n-2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	startup := time.Since(started)
	steadyLatency := fence(n/2 + 1)
	rss, hwm := procMemory(cmd.Process.Pid)
	t.Logf("%d hosts (1 hung BMC, 1 unreachable): every healthy BMC reached %v after the controller started; "+
		"fencing after startup: powered off %v after the request; controller memory: VmRSS %s, VmHWM %s",
		n, startup.Round(time.Millisecond), steadyLatency.Round(time.Millisecond), rss, hwm)
	if before >= n-2 {
		t.Errorf("the first fencing request came after the startup storm (%d BMCs reached): not the case this test is about", before)
	}
	for what, d := range map[string]time.Duration{"during the startup storm": stormLatency, "after startup": steadyLatency} {
		if d > 2*time.Second {
			t.Errorf("fencing %s took %v, more than 2 s", what, d)
		}
	}
}

// procMemory reads a process's VmRSS and VmHWM (peak) from /proc.
func procMemory(pid int) (rss, hwm string) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "?", "?"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "VmRSS":
			rss = strings.TrimSpace(v)
		case "VmHWM":
			hwm = strings.TrimSpace(v)
		}
	}
	return rss, hwm
}
