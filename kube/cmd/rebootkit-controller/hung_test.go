package main

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
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

// hangingBMC accepts connections and never answers.
func hangingBMC(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestHungBMCsFencingLatency (issue 39, point 5) runs the controller
// binary with its default 32 workers on hosts of which 0, 32 or 100 have
// a BMC that accepts connections and never answers (a rack behind a dead
// switch), and 8 healthy ones. A fencing request on a healthy host must
// power it off within 2 s, both while the hung logins run and when they
// all time out and are retried together. It logs each latency. On the old
// code 32 hung logins held every worker: the fencing waited for the login
// timeout.
func TestHungBMCsFencingLatency(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
			t.Fatal("KUBEBUILDER_ASSETS unset although CI builds the envtest binaries")
		}
		t.Skip("API SERVER TEST SKIPPED: set KUBEBUILDER_ASSETS=$(scripts/build-envtest.sh)")
	}
	bin, kubeconfig, c := startEnv(t, assets)
	ctx := context.Background()
	hungAddr := hangingBMC(t)
	const healthy = 8
	const connectTimeout = 10 * time.Second
	for _, hung := range []int{0, 32, 100} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rkh-"}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		hws := map[string]*fake.Power{}
		for i := 0; i < hung+healthy; i++ {
			name := fmt.Sprintf("h-%03d", i)
			addr := hungAddr
			if i >= hung {
				hws[name] = fake.NewPower(time.Now, fake.PowerConfig{})
				srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hws[name], "admin", "pw"))
				defer srv.Close()
				addr = strings.TrimPrefix(srv.URL, "http://")
			}
			if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name + "-bmc",
				Labels: map[string]string{kube.BMCHostLabel: name}},
				Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw")}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
				Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{
					Address: "redfish+http://" + addr + "/redfish/v1/Systems/1", CredentialsName: name + "-bmc"}}}); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", ns.Name, "--baremetal-operator=false", "--stale-reads", "500ms",
			"--leader-elect=false", "--health-probe-bind-address=0", "--concurrent-reconciles", "32",
			"--bmc-call-timeout", connectTimeout.String(), "--bmc-connect-timeout", connectTimeout.String())
		var logs syncBuilder
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		fence := func(i int) time.Duration {
			t.Helper()
			name := fmt.Sprintf("h-%03d", i)
			var bmh metal3.BareMetalHost
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, &bmh); err != nil {
				t.Fatal(err)
			}
			bmh.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
			asked := time.Now()
			if err := c.Update(ctx, &bmh); err != nil {
				t.Fatal(err)
			}
			for hws[name].HardwareOn() {
				if time.Since(asked) > 60*time.Second {
					t.Fatalf("%d hung: host %s not powered off 60 s after the fencing request", hung, name)
				}
				time.Sleep(5 * time.Millisecond)
			}
			return time.Since(asked)
		}
		// While the hung logins run.
		time.Sleep(time.Second) // every host had its first pass
		during := fence(hung)
		// When they time out together and are tried again.
		time.Sleep(time.Until(started.Add(connectTimeout + time.Second)))
		retry := fence(hung + 1)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("%3d hung BMCs: fencing a healthy host took %v while the hung logins ran, %v when they timed out and were retried",
			hung, during.Round(time.Millisecond), retry.Round(time.Millisecond))
		for _, d := range []time.Duration{during, retry} {
			if d > 2*time.Second {
				t.Errorf("%d hung BMCs: fencing took %v, more than 2 s", hung, d)
				out := logs.String()
				if len(out) > 5000 {
					out = out[len(out)-5000:]
				}
				t.Logf("controller output (tail):\n%s", out)
			}
		}
	}
}
